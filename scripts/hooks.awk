# hooks.awk - makes the hooks' generated parts from preload/hooks.list (see
# there): with -v out=header the C header, with -v out=map the version
# script. Any line of the list it cannot read stops the build.
# usage: awk -v out=header|map -f scripts/hooks.awk preload/hooks.list
function trim(s) { gsub(/^[ \t]+|[ \t]+$/, "", s); return s }
# The parameters' names, for a call passing them on: the last word of each.
function args(params,    k, i, p, out) {
	k = split(params, p, ","); out = ""
	for (i = 1; i <= k; i++) {
		sub(/\[[^]]*\][ \t]*$/, "", p[i]); match(p[i], /[A-Za-z_][A-Za-z0-9_]*[ \t]*$/)
		out = out (i > 1 ? ", " : "") trim(substr(p[i], RSTART, RLENGTH))
	}
	return out
}
function decl(ret, name, params) { return ret (ret ~ /\*$/ ? "" : " ") name "(" params ")" }
BEGIN { FS = "|"; n = 0 }
/^[ \t]*(#|$)/ { next }
{
	if (NF < 4 || NF > 5 || trim($1) !~ /^[A-Za-z_][A-Za-z0-9_]*$/ || trim($2) == "" || trim($3) == "" ||
	    (NF == 5 && trim($5) != "first call")) {
		printf "%s:%d: want name | return type | parameters | version [| first call]\n", FILENAME, FNR > "/dev/stderr"
		bad = 1; exit 1
	}
	n++; name[n] = trim($1); ret[n] = trim($2); params[n] = trim($3); ver[n] = trim($4)
	lazy[n] = NF == 5
	if (lazy[n] && params[n] ~ /\.\.\./) {
		printf "%s:%d: %s is variadic: a first-call stub cannot pass its arguments on\n", FILENAME, FNR, name[n] > "/dev/stderr"
		bad = 1; exit 1
	}
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
	print "\n/* X(field, symbol, version or NULL) for every hook looked up at start. */"
	print "#define FN_LIBC_SYMBOLS(X) \\"
	for (i = 1; i <= n; i++)
		if (!lazy[i])
			printf "\tX(%s, \"%s\", %s) \\\n", field[i], name[i], (ver[i] == "" ? "NULL" : "\"" ver[i] "\"")
	print ""
	print "/* X(field, symbol, version or NULL, return type, (parameters), (arguments))"
	print " * for every hook looked up at its first call (the list's fifth field). */"
	print "#define FN_LIBC_FIRST_CALL(X) \\"
	for (i = 1; i <= n; i++)
		if (lazy[i])
			printf "\tX(%s, \"%s\", %s, %s, (%s), (%s)) \\\n", field[i], name[i], (ver[i] == "" ? "NULL" : "\"" ver[i] "\""), ret[i], params[i], args(params[i])
	print ""
	print "\n#endif"
}
