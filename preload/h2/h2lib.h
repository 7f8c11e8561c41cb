/* h2lib.h - HTTP/2's framing and HPACK: Debian's libnghttp2, loaded with
 * dlmopen into a namespace of its own on the first HTTP/2 connection and
 * kept, so that the shim does not link it and an app's own copy (Node.js
 * exports one) neither disturbs it nor is disturbed. */
#ifndef FAULTNET_H2LIB_H
#define FAULTNET_H2LIB_H

#include <nghttp2/nghttp2.h>

/* Every function the engine calls, bound by name. */
#define FN_NGH2_FUNCS(X)                                             \
	X(nghttp2_session_callbacks_new)                             \
	X(nghttp2_session_callbacks_del)                             \
	X(nghttp2_session_callbacks_set_on_begin_headers_callback)   \
	X(nghttp2_session_callbacks_set_on_header_callback)          \
	X(nghttp2_session_callbacks_set_on_frame_recv_callback)      \
	X(nghttp2_session_callbacks_set_on_data_chunk_recv_callback) \
	X(nghttp2_session_callbacks_set_on_stream_close_callback)    \
	X(nghttp2_session_callbacks_set_on_frame_send_callback)      \
	X(nghttp2_option_new)                                        \
	X(nghttp2_option_del)                                        \
	X(nghttp2_option_set_no_auto_window_update)                  \
	X(nghttp2_option_set_no_auto_ping_ack)                       \
	X(nghttp2_option_set_no_http_messaging)                      \
	X(nghttp2_option_set_peer_max_concurrent_streams)            \
	X(nghttp2_option_set_max_send_header_block_length)           \
	X(nghttp2_option_set_no_closed_streams)                      \
	X(nghttp2_session_server_new2)                               \
	X(nghttp2_session_client_new2)                               \
	X(nghttp2_session_del)                                       \
	X(nghttp2_session_mem_recv)                                  \
	X(nghttp2_session_mem_send)                                  \
	X(nghttp2_session_want_read)                                 \
	X(nghttp2_session_want_write)                                \
	X(nghttp2_session_consume)                                   \
	X(nghttp2_session_resume_data)                               \
	X(nghttp2_session_get_stream_user_data)                      \
	X(nghttp2_session_set_stream_user_data)                      \
	X(nghttp2_session_upgrade2)                                  \
	X(nghttp2_session_get_last_proc_stream_id)                   \
	X(nghttp2_submit_request)                                    \
	X(nghttp2_submit_response)                                   \
	X(nghttp2_submit_headers)                                    \
	X(nghttp2_submit_trailer)                                    \
	X(nghttp2_submit_rst_stream)                                 \
	X(nghttp2_submit_settings)                                   \
	X(nghttp2_submit_ping)                                       \
	X(nghttp2_submit_goaway)                                     \
	X(nghttp2_submit_window_update)                              \
	X(nghttp2_strerror)

struct fn_ngh2 {
#define FN_NGH2_FIELD(name) __typeof__(name) *name;
	FN_NGH2_FUNCS(FN_NGH2_FIELD)
#undef FN_NGH2_FIELD
};

/* The bound functions, or NULL when the library cannot be loaded; *why then
 * says what to install. Thread-safe; loads once. */
const struct fn_ngh2 *fn_ngh2_get(const char **why);

#endif
