/* A growable byte buffer for building command lines and log records. */
#include <stdlib.h>
#include <string.h>

#include "strbuf.h"

#define STRBUF_MIN_ALLOC 64

int strbuf_init(struct strbuf *sb, size_t hint)
{
	sb->len = 0;
	sb->alloc = hint < STRBUF_MIN_ALLOC ? STRBUF_MIN_ALLOC : hint;
	sb->buf = malloc(sb->alloc);
	if (!sb->buf)
		return -1;
	sb->buf[0] = '\0';
	return 0;
}

static int strbuf_grow(struct strbuf *sb, size_t extra)
{
	size_t want;
	char *grown;

	if (extra > SIZE_MAX - sb->len - 1)
		return -1;
	want = sb->len + extra + 1;
	if (want <= sb->alloc)
		return 0;
	while (sb->alloc < want)
		sb->alloc = sb->alloc * 2;
	grown = realloc(sb->buf, sb->alloc);
	if (!grown)
		return -1;
	sb->buf = grown;
	return 0;
}

int strbuf_add(struct strbuf *sb, const char *data, size_t n)
{
	if (strbuf_grow(sb, n) < 0)
		return -1;
	memcpy(sb->buf + sb->len, data, n);
	sb->len += n;
	sb->buf[sb->len] = '\0';
	return 0;
}

void strbuf_release(struct strbuf *sb)
{
	free(sb->buf);
	sb->buf = NULL;
	sb->len = sb->alloc = 0;
}
