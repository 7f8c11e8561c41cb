# hooks.awk - makes the hooks' generated parts from preload/hooks.list (see
# there): with -v out=header the C header, with -v out=map the version
# script. Any line of the list it cannot read stops the build.
# usage: awk -v out=header|map -f scripts/hooks.awk preload/hooks.list
function trim(s) { gsub(/^[ \t]+|[ \t]+$/, "", s); return s }
function decl(ret, name, params) { return ret (ret ~ /\*$/ ? "" : " ") name "(" params ")" }
BEGIN { FS = "|"; n = 0 }
/^[ \t]*(#|$)/ { next }
{
	if (NF != 4 || trim($1) !~ /^[A-Za-z_][A-Za-z0-9_]*$/ || trim($2) == "" || trim($3) == "") {
		printf "%s:%d: want name | return type | parameters | version\n", FILENAME, FNR > "/dev/stderr"
		bad = 1; exit 1
	}
	n++; name[n] = trim($1); ret[n] = trim($2); params[n] = trim($3); ver[n] = trim($4)
	field[n] = name[n]; sub(/^_+/, "", field[n])
	if (name[n] in seen) { printf "%s:%d: %s twice\n", FILENAME, FNR, name[n] > "/dev/stderr"; bad = 1; exit 1 }
	seen[name[n]] = 1
}
END {
	if (bad) exit 1
	if (out == "map") {
		print "/* exports.map - generated from preload/hooks.list by scripts/hooks.awk:"
		print " * the shim's dynamic symbol table, the interposed functions and nothing"
		print " * else. */"
		print "{\n  global:"
		for (i = 1; i <= n; i++) print "    " name[i] ";"
		print "  local: *;\n};"
		exit 0
	}
	print "/* hooks.gen.h - generated from preload/hooks.list by scripts/hooks.awk:"
	print " * the exported hooks' signatures, the trampolines' fields and their"
	print " * symbols. Do not edit; change the list. */"
	print "#ifndef FAULTNET_HOOKS_GEN_H\n#define FAULTNET_HOOKS_GEN_H\n"
	print "/* FN_HOOK(name) { body } defines the exported hook. */"
	print "#define FN_HOOK(name) FN_HOOK_##name"
	for (i = 1; i <= n; i++)
		printf "#define FN_HOOK_%s __attribute__((visibility(\"default\"))) %s\n", name[i], decl(ret[i], name[i], params[i])
	print "\n/* struct fn_libc's members: the real function behind each hook. */"
	print "#define FN_LIBC_FIELDS \\"
	for (i = 1; i <= n; i++)
		printf "\t%s; %s\n", decl(ret[i], "(*" field[i] ")", params[i]), (i < n ? "\\" : "")
	print "\n/* X(field, symbol, version or NULL) for every hook. */"
	print "#define FN_LIBC_SYMBOLS(X) \\"
	for (i = 1; i <= n; i++)
		printf "\tX(%s, \"%s\", %s) %s\n", field[i], name[i], (ver[i] == "" ? "NULL" : "\"" ver[i] "\""), (i < n ? "\\" : "")
	print "\n#endif"
}
