"""See DESIGN.md."""
