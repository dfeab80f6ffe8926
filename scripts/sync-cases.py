#!/usr/bin/env python3
"""Copies the master SQL of each case in ../shared/cases/BNN.md (its first
```sql block) to tests/cases/BNN.sql, so the tests do not depend on a
directory outside the repository. `--check` exits 1 when a copy differs."""
import pathlib, re, sys

root = pathlib.Path(__file__).resolve().parent.parent
cases = root.parent / "shared" / "cases"
out = root / "tests" / "cases"
check = "--check" in sys.argv
if not cases.is_dir():
    print(f"no {cases}: nothing to compare", file=sys.stderr)
    sys.exit(0)
differ = 0
for md in sorted(cases.glob("B*.md")):
    m = re.search(r"```sql\n(.*?)```", md.read_text(), re.S)
    if not m:
        continue
    target = out / (md.stem + ".sql")
    text = m.group(1)
    if check:
        if not target.exists() or target.read_text() != text:
            print(f"{target} differs from {md}", file=sys.stderr)
            differ = 1
    else:
        out.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
sys.exit(differ)
