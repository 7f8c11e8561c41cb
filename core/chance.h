/* chance.h - the reproducible random draws behind probability, jitter and
 * the conditions of a rule (the clock is clock.h). */
#ifndef FAULTNET_CHANCE_H
#define FAULTNET_CHANCE_H

#include <stdint.h>

#include "core/rules.h"

/* Reads FAULTNET_SEED (a decimal number); without it the seed is random.
 * NULL when fine, else a message naming the variable. */
const char *fn_seed_init(void);

/* A seed drawn at random, whatever FAULTNET_SEED says now: a process
 * started without it draws one at its join. */
void fn_seed_random(void);

/* A number in [0, 1) that depends only on the seed, key and n: the same
 * seed and the same sequence of decisions give the same answers, whatever
 * other rules or threads do in between. */
double fn_random(uint64_t key, uint64_t n);

/* fn_random(key, n) is the top 53 bits of a mix of this value plus n (for
 * the kernel-side backend, which draws the same numbers in BPF). */
uint64_t fn_random_base(uint64_t key);

/* A key for a rule's draws, from its name. */
uint64_t fn_rule_key(const struct fn_rule *r);

/* Whether rule r's conditions let it apply to this connection or datagram;
 * counts the match. */
bool fn_cond_pass(const struct fn_rule *r);

#endif
