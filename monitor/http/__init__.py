"""The HTTP API (FastAPI) and the live dashboard.

``app`` builds the application and its routes; ``views`` the dashboard's
question and rejection views.
"""
