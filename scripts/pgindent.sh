#!/usr/bin/env bash
# pgindent.sh: lay out C files as PostgreSQL's pgindent does
# (src/tools/pgindent in PostgreSQL's tree), with the same indent program,
# pg_bsd_indent 2.1.1 (Debian: pg-bsd-indent), and the options of
# PostgreSQL 15's pgindent.
#
#   scripts/pgindent.sh [FILE...]          rewrite the given files in place,
#                                          or every .c and .h file of src/
#                                          and test/unit/ git knows
#   scripts/pgindent.sh --check [FILE...]  change nothing: name each file
#                                          that would change (exit status 1
#                                          if any would)
#   scripts/pgindent.sh --diff [FILE...]   the same, with the changes as a
#                                          unified diff
#
# scripts/check-format.sh (make check-fast) runs --check.
#
# Around the indent program, as pgindent does: "//" comments become
# "/* */"; a "/* ---" comment is kept as it is written (indent would reflow
# it); after indenting, two comments run together get a tab between them
# and a return type ending in "*" on a line of its own keeps one space
# before the star.  And two steps of our own: a prototype written over two
# lines ("static void\nname(...);") becomes one line, as in PostgreSQL's
# code (indent takes it for a declaration and indents its name); the braces
# of a compound literal, "(Type) {...}" on one line, are hidden from indent,
# which would take them for a block.  The typedef names come from
# scripts/typedefs.sh.
#
# Two things pgindent itself does that the code keeps: the continuation of
# a declaration's initializer starts at the declaration's own indentation
# (a parenthesis around the expression keeps it aligned), and comments
# longer than 79 columns are refilled.
#
# Exit status 1 when pg_bsd_indent fails or reports an error on a file (the
# file is left as it was) or, with --check or --diff, when a file would
# change; 2 when pg_bsd_indent is missing.
#
# Environment: PG_BSD_INDENT (default pg_bsd_indent).
set -uo pipefail
cd "$(dirname "$0")/.."

indent=${PG_BSD_INDENT:-pg_bsd_indent}
if ! command -v "$indent" >/dev/null; then
  echo "pgindent: no $indent (set PG_BSD_INDENT; Debian: pg-bsd-indent)" >&2
  exit 2
fi

# PostgreSQL 15's pgindent options.
OPTS=(-bad -bap -bbb -bc -bl -cli1 -cp33 -cdb -nce -d0 -di12 -nfc1 -i4 -l79
      -lp -lpl -nip -npro -sac -tpg -ts4)

mode=write
case "${1:-}" in
  --check) mode=check; shift ;;
  --diff) mode=diff; shift ;;
  -*) echo "usage: scripts/pgindent.sh [--check | --diff] [FILE...]" >&2; exit 2 ;;
esac

tmp=$(mktemp -d /tmp/tms-pgindent.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
typedefs=$tmp/typedefs
bash scripts/typedefs.sh >"$typedefs" || exit 1

if [ $# -gt 0 ]; then
  files=("$@")
else
  mapfile -t files < <(git ls-files 'src/*.c' 'src/*.h' 'test/unit/*.c' 'test/unit/*.h')
fi

# format FILE OUT: FILE laid out, into OUT.
format() {
  TYPEDEFS=$typedefs LITERALS=$tmp/literals perl -0777 -pe '
    BEGIN {
      local $/ = "\n";
      open(my $t, "<", $ENV{TYPEDEFS}) or die;
      chomp(my @t = <$t>);
      %type = map { $_ => 1 } @t;
      open($lit, ">", $ENV{LITERALS}) or die;
      $n = 0;
    }
    s{^([ \t]*)//(.*)$}{$1/* $2 */}gm;      # "//" comments
    s{/\* +---}{/*---X_X}g;                 # keep "/* ---" comments as written
    # A prototype has its return type on its own line only in a definition.
    s{^((?:static|extern)[ \t][\w \t]*?)[ \t]*(\**)\n([A-Za-z_]\w*\([^;{}]*?\)[^;{}\n]*;)}
     {$1 . ($2 eq "" ? " " : " $2") . $3}gme;
    # pg_bsd_indent 2.1.1 takes the brace of a compound literal,
    # "(Type) {...}", for a block: a name stands in for the braces while it
    # runs.
    s!(\(\s*(?:struct\s+(\w+)|(\w+))\s*\))\s*(\{[^\{\}\n]*\})!
     (defined $2 || $type{$3}) ? do { print $lit "$4\n"; "$1 tms_compound_literal_" . $n++ } : $&!ge;
  ' "$1" >"$tmp/src.c" || return 1
  local err
  err=$("$indent" "${OPTS[@]}" -U"$typedefs" "$tmp/src.c" "$tmp/out.c" 2>&1)
  if [ $? -ne 0 ] || [ -n "$err" ]; then
    echo "pgindent: $1: ${err:-pg_bsd_indent failed}" >&2
    return 1
  fi
  LITERALS=$tmp/literals perl -0777 -pe '
    BEGIN {
      local $/ = "\n";
      open(my $l, "<", $ENV{LITERALS}) or die;
      chomp(@lit = <$l>);
    }
    s{tms_compound_literal_(\d+)}{$lit[$1]}g;
    s{/\*---X_X}{/* ---}g;
    s{\*/(/\*.*\*/)$}{*/\t$1}gm;            # comments run together
    s{^([A-Za-z_]\S*)[ \t]+\*$}{$1 *}gm;    # "type *" return type line
  ' "$tmp/out.c" >"$2"
}

rc=0
differ=0
for f in "${files[@]}"; do
  if [ ! -f "$f" ]; then
    echo "pgindent: $f: no such file" >&2
    rc=1
    continue
  fi
  if ! format "$f" "$tmp/final"; then
    rc=1
    continue
  fi
  cmp -s "$f" "$tmp/final" && continue
  case $mode in
    write) cat "$tmp/final" >"$f" ;;
    *)
      d=$(diff -u --label "$f" --label "$f (pgindent)" "$f" "$tmp/final")
      # changed lines: every - or + line but the two file headers
      echo "$f: $(grep -E '^[-+]' <<< "$d" | grep -cvE '^(--- |\+\+\+ )') lines differ"
      [ $mode = diff ] && printf '%s\n' "$d"
      differ=$((differ + 1))
      ;;
  esac
done
if [ $differ -gt 0 ]; then
  echo "pgindent: $differ of ${#files[@]} files are not laid out as pgindent does; scripts/pgindent.sh FILE... lays them out"
  rc=1
elif [ $mode != write ] && [ $rc -eq 0 ]; then
  echo "pgindent: ${#files[@]} files laid out as pgindent does"
fi
exit $rc
