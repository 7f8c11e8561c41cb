/* chance.c - conditions (probability, first, every, after, time window) and
 * the seeded random stream behind them. A draw is a hash of (seed, key, n),
 * not a shared generator's next value, so decisions are reproducible and
 * need no lock. */
#include "core/chance.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "core/clock.h"
#include "core/hash.h"

static uint64_t seed;

const char *fn_seed_init(void)
{
	const char *v = secure_getenv("FAULTNET_SEED");
	if (v && *v) {
		char *end;
		errno = 0;
		unsigned long long s = strtoull(v, &end, 10);
		if (errno || *end || *v == '-')
			return "FAULTNET_SEED: must be a whole number from 0 to "
			       "18446744073709551615";
		seed = s;
		return NULL;
	}
	fn_seed_random();
	return NULL;
}

void fn_seed_random(void)
{
	if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) != sizeof(seed))
		seed = fn_now_ns();
}

/* splitmix64's finaliser: a good mix of all 64 bits. */
static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

uint64_t fn_random_base(uint64_t key)
{
	return mix(seed ^ key);
}

double fn_random(uint64_t key, uint64_t n)
{
	uint64_t x = mix(fn_random_base(key) + n);
	return (double)(x >> 11) * (1.0 / 9007199254740992.0);
}

uint64_t fn_rule_key(const struct fn_rule *r)
{
	return fn_hash_str(r->name);
}

static bool in_window(const struct fn_rule *r)
{
	const struct fn_cond *c = &r->cond;
	if (c->start_ms < 0 && c->for_ms < 0)
		return true;
	uint64_t since = fn_now_ns() - __atomic_load_n(&r->stat->enabled_ns, __ATOMIC_ACQUIRE);
	uint64_t start = c->start_ms < 0 ? 0 : (uint64_t)c->start_ms * 1000000u;
	if (since < start)
		return false;
	return c->for_ms < 0 || since - start < (uint64_t)c->for_ms * 1000000u;
}

bool fn_cond_pass(const struct fn_rule *r)
{
	if (!r->has_cond || !r->stat)
		return true;
	const struct fn_cond *c = &r->cond;
	if (!in_window(r))
		return false;
	uint64_t n = __atomic_add_fetch(&r->stat->matches, 1, __ATOMIC_RELAXED);
	if (c->first && n > c->first)
		return false;
	if (c->after && n <= c->after)
		return false;
	if (c->every && n % c->every != 0)
		return false;
	return c->probability >= 1 || fn_random(fn_rule_key(r), n) < c->probability;
}
