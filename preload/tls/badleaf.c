/* badleaf.c - certificates with one defect each, for the tls action's
 * certificate faults (see badleaf.h). Not cached: each faulted handshake
 * pays one signature, which no benchmark measures. */
#include "preload/tls/badleaf.h"

#include <stdio.h>
#include <string.h>

#include "core/http.h"
#include "preload/tls/cert.h"

#define DAY 86400L

/* Made once per process, never written anywhere nor sent. */
static X509 *stranger, *inter;
static EVP_PKEY *stranger_key, *inter_key;

static bool set_cn(const struct fn_ossl *o, X509 *c, const char *cn)
{
	return o->X509_NAME_add_entry_by_txt(o->X509_get_subject_name(c), "CN", MBSTRING_UTF8,
					     (const unsigned char *)cn, -1, -1, 0) == 1;
}

/* A CA certificate named cn for a new key (*key), signed by issuer (its
 * key ikey), or by itself when issuer is NULL. */
static X509 *make_ca(const struct fn_ossl *o, X509 *issuer, EVP_PKEY *ikey, const char *cn,
		     EVP_PKEY **key)
{
	*key = fn_cert_key(o);
	X509 *c = *key ? fn_cert_frame(o, *key, 30 * DAY) : NULL;
	if (c && set_cn(o, c, cn) &&
	    o->X509_set_issuer_name(c, o->X509_get_subject_name(issuer ? issuer : c)) &&
	    fn_cert_ext(o, c, issuer, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") == 0 &&
	    fn_cert_ext(o, c, issuer, NID_key_usage, "critical,keyCertSign,cRLSign") == 0 &&
	    fn_cert_ext(o, c, NULL, NID_subject_key_identifier, "hash") == 0 &&
	    o->X509_sign(c, issuer ? ikey : *key, o->EVP_sha256()))
		return c;
	o->X509_free(c);
	o->EVP_PKEY_free(*key);
	*key = NULL;
	return NULL;
}

/* Who signs a leaf with fault's defect: the run's CA, a stranger, the
 * intermediate; NULL (*cert NULL, *key NULL) for a self-signed one. */
static bool signer(const struct fn_ossl *o, const struct fn_ca *ca, int fault, X509 **cert,
		   EVP_PKEY **key)
{
	*cert = ca->cert, *key = ca->key;
	if (fault == FN_TLSF_SELF_SIGNED)
		*cert = NULL, *key = NULL;
	if (fault == FN_TLSF_UNKNOWN_ISSUER) {
		if (!stranger)
			stranger = make_ca(o, NULL, NULL, "faultnet unknown issuer", &stranger_key);
		*cert = stranger, *key = stranger_key;
	}
	if (fault == FN_TLSF_INCOMPLETE_CHAIN) {
		if (!inter)
			inter = make_ca(o, ca->cert, ca->key, "faultnet intermediate (never sent)",
					&inter_key);
		*cert = inter, *key = inter_key;
	}
	return fault == FN_TLSF_SELF_SIGNED || *cert;
}

/* The validity a real certificate has in that outage. */
static bool times(const struct fn_ossl *o, X509 *c, int fault)
{
	long from = fault == FN_TLSF_EXPIRED ? -31 * DAY : DAY;
	long to = fault == FN_TLSF_EXPIRED ? -DAY : 31 * DAY;
	if (fault != FN_TLSF_EXPIRED && fault != FN_TLSF_NOT_YET_VALID)
		return true;
	return o->X509_gmtime_adj(o->X509_getm_notBefore(c), from) &&
	       o->X509_gmtime_adj(o->X509_getm_notAfter(c), to);
}

X509 *fn_badleaf_mint(const struct fn_ossl *o, const struct fn_ca *ca, EVP_PKEY *key, int fault,
		      const char *name, bool ip)
{
	X509 *by;
	EVP_PKEY *bykey;
	if (!signer(o, ca, fault, &by, &bykey))
		return NULL;
	/* Wrong host: a name no client asks for, as a default vhost's. */
	bool wrong = fault == FN_TLSF_WRONG_HOST;
	char san[300];
	snprintf(san, sizeof(san), "%s:%s", ip && !wrong ? "IP" : "DNS",
		 wrong ? "wrong-host.faultnet.invalid" : name);
	X509 *c = fn_cert_frame(o, key, 30 * DAY);
	bool ok =
	    c && times(o, c, fault) &&
	    set_cn(o, c,
		   wrong	       ? "wrong-host.faultnet.invalid"
		   : strlen(name) > 64 ? "faultnet"
				       : name) &&
	    o->X509_set_issuer_name(c, o->X509_get_subject_name(by ? by : c)) &&
	    fn_cert_ext(o, c, by, NID_basic_constraints, "critical,CA:FALSE") == 0 &&
	    fn_cert_ext(o, c, by, NID_key_usage, "critical,digitalSignature") == 0 &&
	    fn_cert_ext(o, c, by, NID_ext_key_usage, "serverAuth") == 0 &&
	    fn_cert_ext(o, c, by, NID_subject_alt_name, san) == 0 &&
	    (!by || fn_cert_ext(o, c, by, NID_authority_key_identifier, "keyid:always") == 0) &&
	    o->X509_sign(c, by ? bykey : key, o->EVP_sha256());
	if (!ok && c) {
		o->X509_free(c);
		c = NULL;
	}
	return c;
}
