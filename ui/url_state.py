"""Widget state mirrored in the URL, so every view can be pasted as a link.

Before drawing a widget, a URL value that changed since the last run (a pasted link, browser
navigation) wins over the widget's remembered value; after drawing it, the widget's value is written
back to the URL. Each page keeps its own map of URL parameter → session-state key.
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st


@dataclass(frozen=True)
class UrlState:
    keys: dict[str, str]  # URL parameter → widget key
    scope: str  # keeps pages' "last seen" markers apart

    def _seen(self, param: str) -> str:
        return f"_url_{self.scope}_{param}"

    def sync(self, param: str, allowed: list[str], fallback: str | None) -> None:
        key, seen = self.keys[param], self._seen(param)
        wanted = st.query_params.get(param)
        if wanted in allowed and wanted != st.session_state.get(seen):
            st.session_state[key] = wanted
        elif st.session_state.get(key) not in allowed:
            st.session_state[key] = fallback

    def write(self, param: str) -> None:
        value = st.session_state.get(self.keys[param])
        if value is None:
            st.query_params.pop(param, None)
        else:
            st.query_params[param] = value
        st.session_state[self._seen(param)] = value

    def forget(self, param: str) -> None:
        """Drop the parameter, the widget's value and the marker (e.g. when leaving a user)."""
        st.query_params.pop(param, None)
        st.session_state.pop(self.keys[param], None)
        st.session_state.pop(self._seen(param), None)
