/* ossl.h - the relay's own TLS library: Debian 12's OpenSSL 3, loaded with
 * dlmopen(LM_ID_NEWLM) into a link-map namespace of its own the first time a
 * connection needs it, never at start. There it has its own libc and its
 * own symbols: an app that loads another OpenSSL never binds to this one
 * (nor this one to the app's), a trust hook on the app's libcrypto never
 * sees the relay's own verification, and its socket calls never meet the
 * shim's hooks. Objects it returns are freed with its own functions only:
 * its malloc is not ours. */
#ifndef FAULTNET_TLS_OSSL_H
#define FAULTNET_TLS_OSSL_H

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

/* Every function bound, X(library, name): each is looked up by its name at
 * version OPENSSL_3.0.0, and typed by the header's own declaration. Macros
 * of the headers (SSL_CTX_set_min_proto_version, BIO_get_mem_data) are not
 * bound: callers use the function they expand to. */
#define FN_OSSL_FUNCS(X)                         \
	X(crypto, BIO_new_mem_buf)               \
	X(crypto, BIO_new)                       \
	X(crypto, BIO_s_mem)                     \
	X(crypto, BIO_ctrl)                      \
	X(crypto, BIO_free)                      \
	X(crypto, BIO_write)                     \
	X(crypto, BIO_read)                      \
	X(crypto, X509_verify_cert_error_string) \
	X(crypto, ERR_get_error)                 \
	X(crypto, ERR_peek_last_error)           \
	X(crypto, ERR_error_string_n)            \
	X(crypto, ERR_clear_error)               \
	X(crypto, EVP_PKEY_Q_keygen)             \
	X(crypto, EVP_PKEY_free)                 \
	X(crypto, EVP_PKEY_eq)                   \
	X(crypto, EVP_sha256)                    \
	X(crypto, PEM_read_bio_PrivateKey)       \
	X(crypto, PEM_write_bio_PrivateKey)      \
	X(crypto, PEM_read_bio_X509)             \
	X(crypto, PEM_write_bio_X509)            \
	X(crypto, RAND_bytes)                    \
	X(crypto, ASN1_STRING_set)               \
	X(crypto, ASN1_TIME_compare)             \
	X(crypto, ASN1_TIME_diff)                \
	X(crypto, X509_new)                      \
	X(crypto, X509_free)                     \
	X(crypto, X509_up_ref)                   \
	X(crypto, X509_set_version)              \
	X(crypto, X509_get_serialNumber)         \
	X(crypto, X509_getm_notBefore)           \
	X(crypto, X509_getm_notAfter)            \
	X(crypto, X509_get0_notAfter)            \
	X(crypto, X509_set1_notAfter)            \
	X(crypto, X509_gmtime_adj)               \
	X(crypto, X509_set_pubkey)               \
	X(crypto, X509_dup)                      \
	X(crypto, X509_STORE_CTX_get_ex_data)    \
	X(crypto, X509_STORE_CTX_set_error)      \
	X(crypto, X509_get0_pubkey)              \
	X(crypto, X509_get_subject_name)         \
	X(crypto, X509_set_issuer_name)          \
	X(crypto, X509_NAME_add_entry_by_txt)    \
	X(crypto, X509V3_set_ctx)                \
	X(crypto, X509V3_EXT_conf_nid)           \
	X(crypto, X509_add_ext)                  \
	X(crypto, X509_EXTENSION_free)           \
	X(crypto, X509_sign)                     \
	X(crypto, X509_check_private_key)        \
	X(crypto, X509_digest)                   \
	X(crypto, X509_get_ext_by_NID)           \
	X(crypto, X509_get_extension_flags)      \
	X(crypto, CRYPTO_get_ex_new_index)       \
	X(crypto, i2d_X509)                      \
	X(crypto, OPENSSL_sk_num)                \
	X(crypto, OPENSSL_sk_value)              \
	X(ssl, OPENSSL_init_ssl)                 \
	X(ssl, TLS_server_method)                \
	X(ssl, SSL_CTX_new)                      \
	X(ssl, SSL_CTX_free)                     \
	X(ssl, SSL_CTX_ctrl)                     \
	X(ssl, SSL_CTX_set_options)              \
	X(ssl, SSL_CTX_use_certificate)          \
	X(ssl, SSL_CTX_use_PrivateKey)           \
	X(ssl, SSL_CTX_set_alpn_select_cb)       \
	X(ssl, SSL_CTX_set_max_early_data)       \
	X(ssl, SSL_CTX_set_num_tickets)          \
	X(ssl, SSL_new)                          \
	X(ssl, SSL_free)                         \
	X(ssl, SSL_set_fd)                       \
	X(ssl, SSL_accept)                       \
	X(ssl, SSL_read)                         \
	X(ssl, SSL_write)                        \
	X(ssl, SSL_shutdown)                     \
	X(ssl, SSL_get_error)                    \
	X(ssl, SSL_set_ex_data)                  \
	X(ssl, SSL_get_ex_data)                  \
	X(ssl, SSL_select_next_proto)            \
	X(ssl, TLS_client_method)                \
	X(ssl, SSL_CTX_set_verify)               \
	X(ssl, SSL_CTX_set_default_verify_paths) \
	X(ssl, SSL_set_bio)                      \
	X(ssl, SSL_set_accept_state)             \
	X(ssl, SSL_set_connect_state)            \
	X(ssl, SSL_do_handshake)                 \
	X(ssl, SSL_is_init_finished)             \
	X(ssl, SSL_pending)                      \
	X(ssl, SSL_ctrl)                         \
	X(ssl, SSL_set1_host)                    \
	X(ssl, SSL_set_verify)                   \
	X(ssl, SSL_set_alpn_protos)              \
	X(ssl, SSL_get0_alpn_selected)           \
	X(ssl, SSL_get_verify_result)            \
	X(ssl, SSL_get_certificate)              \
	X(ssl, SSL_get_peer_cert_chain)          \
	X(ssl, SSL_use_certificate)              \
	X(ssl, SSL_get_ex_data_X509_STORE_CTX_idx)

#define FN_OSSL_FIELD(lib, name) __typeof__(name) *name;
struct fn_ossl {
	FN_OSSL_FUNCS(FN_OSSL_FIELD)
};
#undef FN_OSSL_FIELD

/* The bound library, loaded on the first call (thread-safe, once); NULL
 * when it cannot be, and *why then says why (for an event). */
const struct fn_ossl *fn_ossl_get(const char **why);

/* The library's last error as text (its queue emptied), for a message. */
const char *fn_ossl_error(char *buf, size_t len);

#endif
