"""Linting what module authors publish. The rules are pure (`rules.py` for a module,
with `typeexpr.py` and `module_facts.py`; `image_rules.py` for a module image; an
import-linter contract keeps them free of I/O); the readers are the I/O half
(`module_files.py`, `providers.py`: a module directory into the facts the rules read).
The decision core serves none of this and imports none of it."""
