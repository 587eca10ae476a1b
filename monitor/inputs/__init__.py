"""The one way in: raw input to validated trial columns, and the loops that feed it.

``wire`` and ``parsing`` decode and validate payloads; ``files`` reads
finished results files; ``watch`` follows a stream of JSON lines.
"""
