"""Voice prompts: builtin, registered, uploaded and ad-hoc voices."""
