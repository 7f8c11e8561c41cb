/* lcfg.c - binds the handful of libconfig functions the parser uses. */
#include "core/lcfg.h"

#include <dlfcn.h>
#include <string.h>

#define BIND(field, sym)                                     \
	do {                                                 \
		*(void **)&l->field = dlsym(l->handle, sym); \
		if (!l->field) {                             \
			fn_lcfg_close(l);                    \
			return "libconfig.so.9 lacks " sym;  \
		}                                            \
	} while (0)

const char *fn_lcfg_open(struct fn_lcfg *l)
{
	memset(l, 0, sizeof(*l));
	/* dlmopen into the base namespace is dlopen by another name: the shim
	 * exports a dlopen hook, and core code must not call back into it. */
	l->handle = dlmopen(LM_ID_BASE, "libconfig.so.9", RTLD_NOW | RTLD_LOCAL);
	if (!l->handle)
		return "cannot load libconfig.so.9 (install the Debian package libconfig9)";
	BIND(init, "config_init");
	BIND(destroy, "config_destroy");
	BIND(read_file, "config_read_file");
	BIND(read_string, "config_read_string");
	BIND(set_include_dir, "config_set_include_dir");
	BIND(length, "config_setting_length");
	BIND(elem, "config_setting_get_elem");
	BIND(member, "config_setting_get_member");
	BIND(get_string, "config_setting_get_string");
	BIND(get_int64, "config_setting_get_int64");
	BIND(get_float, "config_setting_get_float");
	BIND(get_bool, "config_setting_get_bool");
	BIND(remove, "config_setting_remove");
	BIND(write_file, "config_write_file");
	return NULL;
}

void fn_lcfg_close(struct fn_lcfg *l)
{
#ifndef FN_LCFG_RESIDENT /* the fuzzers keep it, so leak reports can name it */
	if (l->handle)
		dlclose(l->handle);
#endif
	memset(l, 0, sizeof(*l));
}
