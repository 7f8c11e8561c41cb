/* elfsym.c - dlsym(RTLD_NEXT, name) for the hooks' libc functions, read from
 * the GNU hash tables of the objects loaded after this one.
 *
 * Why: a start looks up two dozen functions before any signal handler can
 * run a hook (preload/base/libc.c). Through dlsym each lookup took the
 * loader's lock, found the caller's object and set up error catching: 21k
 * instructions and about 17 microseconds of every start (issue 42). The
 * objects' own tables answer the same question in a few hundred.
 *
 * The answer is dlsym's: the first object after this one in the loader's
 * order that defines the name, as dlsym reads a definition (a global or
 * weak symbol, not hidden, of the default version when there are
 * several). Whatever these tables cannot settle as dlsym would (an IFUNC,
 * whose resolver dlsym runs; an object without a GNU hash table; a name
 * found nowhere) is left to dlsym. */
#include "preload/base/elfsym.h"

#include <elf.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/pathcat.h"
#include "core/startdata.h"

extern char **environ;

extern const ElfW(Ehdr) __ehdr_start __attribute__((visibility("hidden")));

/* An address the dynamic section holds: the loader has relocated most
 * entries in place, not all (DT_VERSYM's, say), and none in a read-only
 * dynamic section. One that falls in a loaded segment is an address
 * already; any other is an offset from the load address (which may lie
 * below the link address: a bias that wraps, so no comparison with it). */
FN_START_TEXT static const void *dyn_ptr(const struct dl_phdr_info *info, ElfW(Addr) a)
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_LOAD && a - (info->dlpi_addr + ph->p_vaddr) < ph->p_memsz)
			return (const void *)a;
	}
	return (const void *)(info->dlpi_addr + a);
}

/* Its tables, false when it has no GNU hash table or is a filter (the
 * loader searches a filter's target first, wherever it was loaded). */
FN_START_TEXT static bool obj_read(const struct dl_phdr_info *info, struct fn_elfobj *o)
{
	const ElfW(Dyn) *dyn = NULL;
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
			dyn = (const void *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
	*o = (struct fn_elfobj){.base = info->dlpi_addr};
	for (; dyn && dyn->d_tag != DT_NULL; dyn++) {
		if (dyn->d_tag == DT_SYMTAB)
			o->sym = dyn_ptr(info, dyn->d_un.d_ptr);
		else if (dyn->d_tag == DT_STRTAB)
			o->str = dyn_ptr(info, dyn->d_un.d_ptr);
		else if (dyn->d_tag == DT_GNU_HASH)
			o->gnu = dyn_ptr(info, dyn->d_un.d_ptr);
		else if (dyn->d_tag == DT_VERSYM)
			o->versym = dyn_ptr(info, dyn->d_un.d_ptr);
		else if (dyn->d_tag == DT_FILTER || dyn->d_tag == DT_AUXILIARY)
			return false;
	}
	return o->sym && o->str && o->gnu;
}

/* Whether path's last component begins with prefix. */
FN_START_TEXT static bool named(const char *path, const char *prefix)
{
	const char *slash = fn_last_slash(path);
	return fn_starts(slash ? slash + 1 : path, prefix);
}

struct collecting {
	struct fn_elfsym_scope *scope;
	bool seen; /* this object passed */
};

/* dl_iterate_phdr lists the objects in the loader's order, libc among
 * those loaded with the program; the walk ends there: what comes after
 * (libraries opened with dlopen, which RTLD_NEXT may not see) is left to
 * dlsym. The vdso, listed after the program, is no library of the
 * program's; this object is found by its program headers. */
FN_START_TEXT static int collect(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct collecting *c = arg;
	struct fn_elfsym_scope *s = c->scope;
	(void)size;
	if (!c->seen) {
		c->seen = (const void *)info->dlpi_phdr ==
			  (const char *)&__ehdr_start + __ehdr_start.e_phoff;
		return 0;
	}
	const char *name = info->dlpi_name ? info->dlpi_name : "";
	if (named(name, "linux-vdso.") || named(name, "linux-gate."))
		return 0;
	if (s->n == (int)(sizeof(s->objs) / sizeof(s->objs[0])) || !obj_read(info, &s->objs[s->n]))
		return 1;
	s->n++;
	return named(name, "libc.so.") ? 1 : 0;
}

/* What dlsym does beyond the tables: an auditor (LD_AUDIT) may redirect
 * each symbol it binds, and LD_DYNAMIC_WEAK prefers a later strong
 * definition to a weak one. With either, dlsym answers every name. */
FN_START_TEXT static bool dlsym_only(void)
{
	for (char **e = environ; e && *e; e++)
		if (fn_starts(*e, "LD_AUDIT=") || fn_starts(*e, "LD_DYNAMIC_WEAK="))
			return true;
	return false;
}

FN_START_TEXT void fn_elfsym_scope(struct fn_elfsym_scope *s)
{
	struct collecting c = {.scope = s};
	s->n = 0;
	if (!dlsym_only())
		dl_iterate_phdr(collect, &c);
}

FN_START_TEXT static uint32_t gnu_hash(const char *s)
{
	uint32_t h = 5381;
	for (; *s; s++)
		h = h * 33 + (unsigned char)*s;
	return h;
}

enum found { NOT_HERE, FOUND, ASK_DLSYM };

/* As the loader reads a symbol for dlsym: defined, global or weak, and of
 * version index 0 or 1 (no version), else not hidden (the default). */
FN_START_TEXT static enum found take(const struct fn_elfobj *o, uint32_t i, bool *versioned)
{
	const ElfW(Sym) *s = &o->sym[i];
	unsigned type = ELF64_ST_TYPE(s->st_info), bind = ELF64_ST_BIND(s->st_info);
	if (s->st_shndx == SHN_UNDEF)
		return NOT_HERE;
	/* An IFUNC, TLS, an absolute or local symbol, a unique one: dlsym's
	 * own rules. */
	if ((type != STT_FUNC && type != STT_OBJECT) || (bind != STB_GLOBAL && bind != STB_WEAK) ||
	    s->st_shndx >= SHN_LORESERVE)
		return ASK_DLSYM;
	if (!s->st_value)
		return NOT_HERE;
	unsigned v = o->versym ? o->versym[i] : 1;
	if ((v & 0x7fff) < 2)
		return FOUND;
	*versioned = !(v & 0x8000);
	return NOT_HERE;
}

FN_START_TEXT static enum found obj_find(const struct fn_elfobj *o, const char *name, uint32_t h,
					 void **out)
{
	const uint32_t nbuckets = o->gnu[0], first = o->gnu[1], nbloom = o->gnu[2],
		       shift = o->gnu[3];
	const ElfW(Addr) *bloom = (const void *)&o->gnu[4];
	const uint32_t *buckets = (const void *)&bloom[nbloom];
	const uint32_t *chain = &buckets[nbuckets];
	const unsigned bits = sizeof(ElfW(Addr)) * 8;
	ElfW(Addr) word = bloom[(h / bits) & (nbloom - 1)];
	if (!nbuckets || !((word >> (h % bits)) & (word >> ((h >> shift) % bits)) & 1))
		return NOT_HERE;
	uint32_t i = buckets[h % nbuckets], defaults = 0, at = 0;
	for (; i >= first; i++) {
		uint32_t ch = chain[i - first];
		bool versioned = false;
		enum found f = (ch | 1) == (h | 1) && fn_same(o->str + o->sym[i].st_name, name)
				   ? take(o, i, &versioned)
				   : NOT_HERE;
		if (f == ASK_DLSYM)
			return f;
		if (f == FOUND || (versioned && defaults++ == 0))
			at = i;
		if (f == FOUND || (ch & 1))
			break;
	}
	/* None unversioned: the one default version, as dlsym takes it. */
	if (!at || (o->versym && (o->versym[at] & 0x7fff) >= 2 && defaults != 1))
		return NOT_HERE;
	*out = (void *)(o->base + o->sym[at].st_value);
	return FOUND;
}

FN_START_TEXT void *fn_elfsym_next(const struct fn_elfsym_scope *s, const char *name)
{
	uint32_t h = gnu_hash(name);
	for (int i = 0; i < s->n; i++) {
		void *p = NULL;
		enum found f = obj_find(&s->objs[i], name, h, &p);
		if (f == FOUND)
			return p;
		if (f == ASK_DLSYM)
			return NULL;
	}
	return NULL;
}
