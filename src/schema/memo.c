/*
 * The validator's memo: the result of validating an instance value
 * against a $ref target, remembered for the rest of one validation.
 *
 * Only $ref targets are remembered: the compiled schema is a tree apart
 * from its $ref edges, so a (node, value) pair can be reached twice only
 * through a $ref. With the memo every pair costs its keywords once, and a
 * validation costs at most (schema nodes) x (instance values) visits.
 *
 * Open addressing with linear probing, keyed by (target, value address);
 * nothing is ever removed within a validation, and a slot of an older
 * generation counts as empty, so a new validation begins without
 * clearing the table.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "schema/node.h"

/* First table: 16 KB; the largest: 32 MB (2M slots, 1M pairs). Beyond
 * it nothing more is remembered and the step budget bounds the work. */
#define MEMO_FIRST_CAP 1024u
#define MEMO_MAX_CAP   (1u << 21)
#define GEN_MAX        ((1u << 30) - 1)

/* Fibonacci hashing: the high bits of the product (the low bits of an
 * aligned address are zeros). */
static size_t home(const sch_memo *m, uint32_t node, const void *id)
{
	uint64_t h = ((uint64_t)(uintptr_t)id ^ ((uint64_t)node << 48)) *
	             0x9E3779B97F4A7C15ull;
	return (size_t)(h >> m->shift);
}

static int current(const sch_memo *m, const sch_memo_slot *sl)
{
	return (sl->mark >> 2) == m->gen;
}

void sch__memo_begin(sch_memo *m)
{
	m->count = 0;
	if (m->gen < GEN_MAX) {
		m->gen++;
		return;
	}
	/* after a billion validations: start the generations again */
	if (m->slots)
		memset(m->slots, 0, m->cap * sizeof(*m->slots));
	m->gen = 1;
}

static sch_memo_slot *find(const sch_memo *m, uint32_t node, const void *id)
{
	size_t i = home(m, node, id);
	for (;;) {
		sch_memo_slot *sl = &m->slots[i];
		if (!current(m, sl) || (sl->id == id && sl->node == node))
			return sl;
		i = (i + 1) & (m->cap - 1);
	}
}

unsigned sch__memo_get(const sch_memo *m, uint32_t node, const void *id)
{
	if (!m->count)
		return SCH_MEMO_UNKNOWN;
	const sch_memo_slot *sl = find(m, node, id);
	return current(m, sl) ? (sl->mark & 3u) : SCH_MEMO_UNKNOWN;
}

/* Double the table, keeping this validation's pairs. 0, or -1. */
static int grow(sch_memo *m)
{
	size_t cap = m->cap ? m->cap * 2 : MEMO_FIRST_CAP;
	if (cap > MEMO_MAX_CAP)
		return -1;
	sch_memo_slot *slots = calloc(cap, sizeof(*slots));
	if (!slots)
		return -1;
	sch_memo old = *m;
	m->slots = slots;
	m->cap = cap;
	for (m->shift = 64; cap > 1; cap >>= 1)
		m->shift--;
	for (size_t i = 0; i < old.cap; i++)
		if (current(&old, &old.slots[i])) {
			sch_memo_slot *sl =
			    find(m, old.slots[i].node, old.slots[i].id);
			*sl = old.slots[i];
		}
	free(old.slots);
	return 0;
}

void sch__memo_put(sch_memo *m, uint32_t node, const void *id, unsigned state)
{
	if ((m->count + 1) * 2 > m->cap && grow(m) < 0 &&
	    (!m->cap || (m->count + 1) * 4 > m->cap * 3))
		return; /* full (at most 3/4 used) */
	sch_memo_slot *sl = find(m, node, id);
	if (!current(m, sl))
		m->count++;
	sl->id = id;
	sl->node = node;
	sl->mark = m->gen << 2 | (state & 3u);
}

void sch__memo_free(sch_memo *m)
{
	free(m->slots);
	memset(m, 0, sizeof(*m));
}
