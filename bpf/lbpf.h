/* lbpf.h - libbpf and zlib, loaded only when the kernel-side backend runs.
 * Every other faultctl verb (a group flip above all) would otherwise pay
 * for mapping and relocating libbpf, libelf and libz at each start: about
 * half a millisecond on a two-core machine, a tenth of a flip. The backend's
 * files include this header instead of libbpf's; its macros send the calls
 * (the skeleton's too) through the table fn_lbpf_open() fills. */
#ifndef FAULTNET_LBPF_H
#define FAULTNET_LBPF_H

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <zlib.h>

struct fn_lbpf {
	int (*map_fd)(const struct bpf_map *);
	int (*map_update)(const struct bpf_map *, const void *, size_t, const void *, size_t,
			  __u64);
	int (*map_lookup)(const struct bpf_map *, const void *, size_t, void *, size_t, __u64);
	int (*map_delete)(const struct bpf_map *, const void *, size_t, __u64);
	int (*map_set_max_entries)(struct bpf_map *, __u32);
	int (*fd_lookup_and_delete)(int, const void *, void *);
	int (*open_skeleton)(struct bpf_object_skeleton *, const struct bpf_object_open_opts *);
	int (*load_skeleton)(struct bpf_object_skeleton *);
	void (*destroy_skeleton)(struct bpf_object_skeleton *);
	struct bpf_link *(*attach_cgroup)(const struct bpf_program *, int);
	libbpf_print_fn_t (*set_print)(libbpf_print_fn_t);
	struct ring_buffer *(*rb_new)(int, ring_buffer_sample_fn, void *,
				      const struct ring_buffer_opts *);
	int (*rb_consume)(struct ring_buffer *);
	void (*rb_free)(struct ring_buffer *);
	gzFile (*gzopen)(const char *, const char *);
	char *(*gzgets)(gzFile, char *, int);
	int (*gzclose)(gzFile);
};

extern struct fn_lbpf fn_lbpf;

/* Loads both libraries once; NULL on success, else what is missing. */
const char *fn_lbpf_open(void);

#define bpf_map__fd(...) fn_lbpf.map_fd(__VA_ARGS__)
#define bpf_map__update_elem(...) fn_lbpf.map_update(__VA_ARGS__)
#define bpf_map__lookup_elem(...) fn_lbpf.map_lookup(__VA_ARGS__)
#define bpf_map__delete_elem(...) fn_lbpf.map_delete(__VA_ARGS__)
#define bpf_map__set_max_entries(...) fn_lbpf.map_set_max_entries(__VA_ARGS__)
#define bpf_map_lookup_and_delete_elem(...) fn_lbpf.fd_lookup_and_delete(__VA_ARGS__)
#define bpf_object__open_skeleton(...) fn_lbpf.open_skeleton(__VA_ARGS__)
#define bpf_object__load_skeleton(...) fn_lbpf.load_skeleton(__VA_ARGS__)
#define bpf_object__destroy_skeleton(...) fn_lbpf.destroy_skeleton(__VA_ARGS__)
#define bpf_program__attach_cgroup(...) fn_lbpf.attach_cgroup(__VA_ARGS__)
#define libbpf_set_print(...) fn_lbpf.set_print(__VA_ARGS__)
#define ring_buffer__new(...) fn_lbpf.rb_new(__VA_ARGS__)
#define ring_buffer__consume(...) fn_lbpf.rb_consume(__VA_ARGS__)
#define ring_buffer__free(...) fn_lbpf.rb_free(__VA_ARGS__)
#define gzopen(...) fn_lbpf.gzopen(__VA_ARGS__)
#define gzgets(...) fn_lbpf.gzgets(__VA_ARGS__)
#define gzclose(...) fn_lbpf.gzclose(__VA_ARGS__)

#endif
