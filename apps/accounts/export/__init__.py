"""Account export: manifest and paged sections (service.py), the command and the views."""
