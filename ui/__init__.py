"""Streamlit rendering helpers shared by the pages; pure builders (figures, tables) are unit-tested."""
