/* lbpf.c - binds the libbpf and zlib functions the backend calls (lbpf.h). */
#include "bpf/lbpf.h"

#include <dlfcn.h>
#include <stdio.h>

struct fn_lbpf fn_lbpf;

#define BIND(h, lib, field, sym)                           \
	do {                                               \
		*(void **)&fn_lbpf.field = dlsym(h, #sym); \
		if (!fn_lbpf.field)                        \
			return lib " lacks " #sym;         \
	} while (0)

static const char *bind_libbpf(void *h)
{
	BIND(h, "libbpf.so.1", map_fd, bpf_map__fd);
	BIND(h, "libbpf.so.1", map_update, bpf_map__update_elem);
	BIND(h, "libbpf.so.1", map_lookup, bpf_map__lookup_elem);
	BIND(h, "libbpf.so.1", map_delete, bpf_map__delete_elem);
	BIND(h, "libbpf.so.1", map_set_max_entries, bpf_map__set_max_entries);
	BIND(h, "libbpf.so.1", fd_lookup_and_delete, bpf_map_lookup_and_delete_elem);
	BIND(h, "libbpf.so.1", open_skeleton, bpf_object__open_skeleton);
	BIND(h, "libbpf.so.1", load_skeleton, bpf_object__load_skeleton);
	BIND(h, "libbpf.so.1", destroy_skeleton, bpf_object__destroy_skeleton);
	BIND(h, "libbpf.so.1", attach_cgroup, bpf_program__attach_cgroup);
	BIND(h, "libbpf.so.1", set_print, libbpf_set_print);
	BIND(h, "libbpf.so.1", rb_new, ring_buffer__new);
	BIND(h, "libbpf.so.1", rb_consume, ring_buffer__consume);
	BIND(h, "libbpf.so.1", rb_free, ring_buffer__free);
	return NULL;
}

static const char *bind_zlib(void *h)
{
	BIND(h, "libz.so.1", gzopen, gzopen);
	BIND(h, "libz.so.1", gzgets, gzgets);
	BIND(h, "libz.so.1", gzclose, gzclose);
	return NULL;
}

const char *fn_lbpf_open(void)
{
	/* Kept open for the life of the process: the backend's links and
	 * ring buffers live until it exits. dlmopen(LM_ID_BASE) rather than
	 * dlopen: faultctl may run with the shim preloaded, whose dlopen hook
	 * is for the application's libraries. */
	static const char *done;
	static int opened;
	if (opened)
		return done;
	opened = 1;
	void *b = dlmopen(LM_ID_BASE, "libbpf.so.1", RTLD_NOW | RTLD_LOCAL);
	void *z = b ? dlmopen(LM_ID_BASE, "libz.so.1", RTLD_NOW | RTLD_LOCAL) : NULL;
	if (!b)
		done = "cannot load libbpf.so.1 (install the Debian package libbpf1)";
	else if (!z)
		done = "cannot load libz.so.1 (install the Debian package zlib1g)";
	else if (!(done = bind_libbpf(b)))
		done = bind_zlib(z);
	return done;
}
