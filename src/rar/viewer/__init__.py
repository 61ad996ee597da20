"""``rar view``: a local, read-only web viewer of a run store.

This package holds the server and its JSON API (:func:`create_app`); the pages are static files
that render the API's data as text. Nothing here writes a run's files.
"""

from __future__ import annotations

from rar.viewer.app import SECURITY_HEADERS, create_app
from rar.viewer.net import LOOPBACK_HOSTS, host_warning, is_loopback

__all__ = ["LOOPBACK_HOSTS", "SECURITY_HEADERS", "create_app", "host_warning", "is_loopback"]
