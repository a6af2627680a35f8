/*
 * libinbox — which declarations are the library's ABI.
 *
 * libinbox is built with hidden visibility (-fvisibility=hidden): of the
 * shared library's symbols only those declared with INBOX_API in the
 * installed headers are exported; everything else (inbox__*, sch__*, the
 * backends' functions) stays inside it and may change in any release. A
 * test (tests/abi_exports.sh) checks that the exported set is exactly the
 * functions and variables the headers under include/inbox/ declare.
 *
 * Included by every public header.
 */
#ifndef INBOX_EXPORT_H
#define INBOX_EXPORT_H

#ifndef INBOX_API
#if defined(__GNUC__) || defined(__clang__)
#define INBOX_API __attribute__((visibility("default")))
#else
#define INBOX_API
#endif
#endif

#endif /* INBOX_EXPORT_H */
