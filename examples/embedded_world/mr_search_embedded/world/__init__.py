"""The embedded default world (synthetic mini-wiki + questions); see ``world.py`` for its design."""
