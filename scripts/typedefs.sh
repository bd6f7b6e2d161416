#!/usr/bin/env bash
# typedefs.sh: the typedef names pg_bsd_indent must know (its -U file), so
# that it lays out "Type *name" and declarations as PostgreSQL's pgindent
# does rather than as a multiplication.
#
#   scripts/typedefs.sh                print the typedefs of tms's own code
#                                      (src/, test/unit/) and of
#                                      src/tools/typedefs.list, one a line
#   scripts/typedefs.sh --external     rewrite src/tools/typedefs.list: the
#                                      typedefs of PostgreSQL's server headers
#                                      ($(pg_config --includedir-server)) and
#                                      of the system and library headers our
#                                      sources include (and what they include)
#
# The list of other people's headers is committed so that the layout does not
# depend on the headers installed on the machine that checks it; run
# --external again when the code includes a new library.  Our own typedefs are
# read at every run, so a new one needs no step.
#
# Names are found in the text: the last name of each "typedef ...;" at the
# top level (brace bodies dropped), or the name in "(*name)" of a function
# pointer type.  PostgreSQL builds its list from debugging symbols instead;
# reading the text finds the same names for the headers we use.  Names that
# are ordinary words in code (pgindent's own exclusions and a few of ours)
# are left out: a variable of such a name would be taken for a type.
set -euo pipefail
cd "$(dirname "$0")/.."

LIST=src/tools/typedefs.list

# Print the typedef names declared in the files named on stdin.
extract() {
  perl -e '
    my %seen;
    while (my $f = <STDIN>) {
      chomp $f;
      open(my $fh, "<", $f) or next;
      local $/; my $s = <$fh>; close $fh;
      $s =~ s{/\*.*?\*/}{ }gs;                 # comments
      $s =~ s{//[^\n]*}{}g;
      $s =~ s{\\\n}{ }g;                       # continued lines
      $s =~ s{^[ \t]*#[^\n]*}{}gm;             # preprocessor lines
      $s =~ s{"(?:[^"\\\n]|\\.)*"}{""}g;       # strings
      $s =~ s{\x27(?:[^\x27\\\n]|\\.)*\x27}{0}g;
      $s =~ s{__attribute__\s*(\((?:[^()]++|(?1))*\))}{ }g;
      # each typedef up to its ";", brace bodies (balanced) dropped
      while ($s =~ m{\btypedef\b((?:[^;{}]++|(\{(?:[^{}]++|(?2))*\}))*);}g) {
        my $d = $1;
        1 while $d =~ s{\{[^{}]*\}}{ }g;
        my @names;
        if ($d =~ m{\(\s*\*\s*\w}) {
          push @names, $1 while $d =~ m{\(\s*\*\s*(?:const\s+)?(\w+)\s*\)}g;
        } elsif ($d =~ m{^\s*[\w\s\*]*?(\w+)\s*\(}) {
          push @names, $1;                     # a function type
        } else {
          1 while $d =~ s{\[[^\[\]]*\]}{}g;
          for my $p (split /,/, $d) {
            push @names, $1 if $p =~ m{(\w+)\s*$};
          }
        }
        for (@names) { $seen{$_} = 1 if /^[A-Za-z_]\w*$/; }
      }
    }
    # not types: C words, and names used as ordinary words in code
    # (pgindent excludes the first two lines; the rest are ours: "text" is
    # a type of PostgreSQL and the name of variables of ours, "Pool" a type
    # of its optimizer and a variable of ours)
    delete @seen{qw(
      ANY FD_SET U abs allocfunc boolean date digit ilist interval iterator
      other pointer printfunc reference string timestamp type wrap
      int char short long unsigned signed void float double const struct
      union enum
      text Pool
    )};
    print "$_\n" for sort keys %seen;
  '
}

if [ "${1:-}" = --external ]; then
  pg_config=${PG_CONFIG:-pg_config}
  server=$("$pg_config" --includedir-server)
  # The system and library headers the sources include, with everything they
  # include in turn (the compiler resolves them).
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  git ls-files 'src/*.c' 'src/*.h' 'test/unit/*.c' 'test/unit/*.h' |
    xargs grep -h '^#include <' | sed 's/[[:space:]]*$//' | sort -u >"$tmp/sys.c"
  ${CC:-cc} -M -I"$server" "$tmp/sys.c" |
    sed 's/\\$//' | tr ' ' '\n' | grep '\.h$' >"$tmp/files"
  find "$server" -name '*.h' >>"$tmp/files"
  {
    echo "# src/tools/typedefs.list: the typedef names of PostgreSQL's server"
    echo "# headers and of the system and library headers tms includes, for"
    echo "# pg_bsd_indent (scripts/pgindent.sh).  Made by"
    echo "# scripts/typedefs.sh --external; do not edit."
    sort -u "$tmp/files" | extract | grep -v '^__'
  } >"$LIST"
  echo "typedefs: $(grep -vc '^#' "$LIST") names in $LIST"
  exit 0
fi

{
  git ls-files -co --exclude-standard 'src/*.c' 'src/*.h' 'test/unit/*.c' 'test/unit/*.h' | extract
  grep -v '^#' "$LIST"
  echo bool
  echo __int128
} | sort -u
