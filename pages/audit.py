"""Audit (admins): who changed what, and when; exportable."""

from ui.audit.view import render_audit
from ui.platform_state import home_workspace
from ui.shell import require_router

require_router()
render_audit(home_workspace().audit)
