#!/usr/bin/env bash
# check-docs.sh: README.md's settings table ("## Settings") names exactly the
# tms.* settings the C code defines.
#
# A setting is defined by DefineCustom{Bool,Int,Real,String,Enum}Variable
# in src/ (src/bridge/settings.c and the layers that own theirs): its first
# argument is a "tms.name" literal, or an element of a static array of the
# same file whose initializer holds the "tms.name" literals (as the
# cooldowns of src/ops/policy.c).  A first argument of any other form is
# an error here, so that no definition goes unseen.  A table row may name
# several settings (each in backquotes in its first column).
#
# Exit status 1, with one line per setting defined but not documented, or
# documented but not defined.  Run by scripts/check-fast.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 - <<'EOF'
import glob
import re
import sys

problems = []
defined = {}
for path in sorted(glob.glob("src/**/*.[ch]", recursive=True)):
    with open(path) as f:
        text = f.read()
    for m in re.finditer(r"\bDefineCustom(?:Bool|Int|Real|String|Enum)Variable\s*\(\s*([^,]*),", text):
        arg = m.group(1).strip()
        line = text.count("\n", 0, m.start()) + 1
        lit = re.fullmatch(r'"(tms\.[a-z0-9_.]+)"', arg)
        elem = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)\s*\[[^\]]*\]\s*\.\s*[A-Za-z_][A-Za-z0-9_]*", arg)
        if lit:
            defined.setdefault(lit.group(1), "%s:%d" % (path, line))
            continue
        if elem:
            init = re.search(r"\b%s\s*\[\s*\]\s*=\s*\{(.*?)\n\};" % re.escape(elem.group(1)), text, re.S)
            names = re.findall(r'"(tms\.[a-z0-9_.]+)"', init.group(1)) if init else []
            if names:
                for n in names:
                    defined.setdefault(n, "%s:%d" % (path, line))
                continue
        problems.append("%s:%d: a setting defined by %s, which this check cannot read"
                        " (scripts/check-docs.sh)" % (path, line, arg))

with open("README.md") as f:
    readme = f.read()
section = re.search(r"^## Settings\n(.*?)(?=^## )", readme, re.S | re.M)
if not section:
    sys.exit("check-docs: README.md has no \"## Settings\" section")
documented = {}
for line in section.group(1).splitlines():
    if line.startswith("|") and not re.match(r"^\|\s*(setting|-+)\s*\|", line):
        first = line.split("|")[1]
        for n in re.findall(r"`(tms\.[a-z0-9_.]+)`", first):
            documented.setdefault(n, line[:60])

for n in sorted(set(defined) - set(documented)):
    problems.append("README.md: setting %s (defined at %s) is not in the settings table"
                    % (n, defined[n]))
for n in sorted(set(documented) - set(defined)):
    problems.append("README.md: the settings table names %s, which no DefineCustom*Variable"
                    " in src/ defines" % n)
if len(defined) < 10:
    problems.append("check-docs: only %d settings found in src/: the pattern no longer"
                    " matches the code" % len(defined))
for p in problems:
    print(p)
if problems:
    sys.exit(1)
print("check-docs: README.md's settings table names the %d tms.* settings of src/" % len(defined))
EOF
