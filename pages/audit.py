"""Audit (admins): who changed what, and when; exportable."""

from backends.store.audit import AuditStore
from ui.audit_view import render_audit
from ui.shell import require_router

require_router()
render_audit(AuditStore())
