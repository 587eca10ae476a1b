"""Rubric schemas: per-trial signals to a category with default weights."""
