/*-------------------------------------------------------------------------
 *
 * filter_tree.h
 *	  The tree of a parsed where filter, shared by its two readers: the
 *	  partition filter of a compaction (compact_filter.c, which parses
 *	  every where text) and the row filter of a deletion (row_filter.c,
 *	  which binds the same tree to the table's columns).
 *
 * Rules: one grammar, one parser (compact_filter.c's, bounded in text,
 * nodes and depth); readers walk the tree and never change it.  A name
 * and a literal are the text the user gave, unquoted; no reader passes
 * them on as text to another language.
 *
 * src/iceberg/compact/filter_tree.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_ICEBERG_FILTER_TREE_H
#define TMS_ICEBERG_FILTER_TREE_H

#include "iceberg/compact/compact.h"

typedef enum IcebergFilterKind
{
	IF_AND,
	IF_OR,
	IF_NOT,
	IF_CMP,						/* name op lits[0] */
	IF_IN,						/* name IN lits (negate: NOT IN) */
	IF_NULL						/* name IS NULL (negate: IS NOT NULL) */
} IcebergFilterKind;

typedef enum IcebergFilterOp
{
	IF_EQ,
	IF_NE,
	IF_LT,
	IF_LE,
	IF_GT,
	IF_GE
} IcebergFilterOp;

typedef enum IcebergFilterLitKind
{
	IF_STRING,
	IF_NUMBER,
	IF_BOOL
} IcebergFilterLitKind;

typedef struct IcebergFilterLit
{
	IcebergFilterLitKind kind;
	char	   *text;			/* string contents or the number's text */
	bool		b;
} IcebergFilterLit;

struct SpecBinding;				/* compact_filter.c's, per partition spec */

typedef struct IcebergFilterNode
{
	IcebergFilterKind kind;
	bool		negate;			/* NOT IN, IS NOT NULL */
	IcebergFilterOp op;
	struct IcebergFilterNode *a;
	struct IcebergFilterNode *b;
	char	   *name;
	int			nlits;
	IcebergFilterLit *lits;
	int			nbind;
	struct SpecBinding *bind;
} IcebergFilterNode;

/* The root of a parsed filter (iceberg_partition_filter_parse). */
extern const IcebergFilterNode *iceberg_partition_filter_root(const IcebergPartitionFilter *f);

/*
 * A literal as an integer value of type t (boolean, int, long, date,
 * time, timestamps: their Iceberg units) with compaction's conversions
 * ('YYYY-MM-DD', 'YYYY-MM-DD HH:MM:SS[.ffffff][Z|+HH:MM]', a number);
 * false when it is not one.
 */
extern bool iceberg_filter_lit_int(const IcebergFilterLit *l, IcebergTypeId t, int64_t *out);

#endif							/* TMS_ICEBERG_FILTER_TREE_H */
