/* elfsym.h - the libc functions behind the shim's hooks found at start by
 * reading the symbol tables the loader has mapped, not by dlsym. */
#ifndef FAULTNET_ELFSYM_H
#define FAULTNET_ELFSYM_H

#include <link.h>
#include <stdint.h>

/* An object's dynamic symbol table, as the loader has mapped it. */
struct fn_elfobj {
	ElfW(Addr) base;
	const ElfW(Sym) * sym;
	const char *str;
	const uint32_t *gnu;
	const ElfW(Half) * versym;
};

/* The objects loaded after this one, in the loader's order, up to the
 * first without a GNU hash table. On the caller's stack: two threads
 * that resolve at once (a hook run before the constructor) share
 * nothing. */
struct fn_elfsym_scope {
	struct fn_elfobj objs[8];
	int n;
};

void fn_elfsym_scope(struct fn_elfsym_scope *s);

/* What dlsym(RTLD_NEXT, name) would give from this object, for a plain
 * function or object of a default version; NULL when the tables cannot
 * tell (an IFUNC, an object past the scope's, a name they do not hold):
 * the caller then asks dlsym. */
void *fn_elfsym_next(const struct fn_elfsym_scope *s, const char *name);

#endif
