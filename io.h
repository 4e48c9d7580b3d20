/* run's input and output: its one way to fail (die, a one-line message and status 1), the checks
 * of what it wrote to stdout, the escaping that keeps a user's names and the model's pieces on
 * one line of plain text (or a JSON string), text files read whole and checked for UTF-8, and
 * Ctrl-C caught.
 *
 * It leaves what is printed to the modes (generate.c, chat.c, compare.c, tokenize.c) and the
 * command line to run.c.
 */
#ifndef IO_H
#define IO_H

#include <stddef.h>
#include <stdio.h>

#include "tokenizer.h"

/* Prints "run: <message>" on one line to stderr and exits with status 1, without freeing
 * anything (_exit: LeakSanitizer would count what a register no longer points to as a leak).
 * The message (printf's fmt and arguments) is escaped as write_escaped does, so that a name the
 * user gave (a path, an option) with a newline or a terminal's escape codes keeps it one line
 * and plain text; it is cut at 8191 bytes. Everything printed before is flushed first, and the
 * file named by remove_on_error is removed. */
void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* Has die remove `path`, just opened as f, if it is a regular file (never a device or a FIFO,
 * such as --logits /dev/null): an output an error would leave incomplete. die removes it only
 * while the path still names that file (same device and inode), never one put there since.
 * path NULL: nothing is removed any more (the file is complete). */
void remove_on_error(const char *path, FILE *f);

/* Flushes stdout: 1 when its reader is gone (EPIPE: `run ... | head` closed the pipe), 0 when
 * everything written so far went out; any other failed write (a full disk, a closed stdout) dies
 * naming stdout. Needs SIGPIPE ignored (run.c's main), so that a closed pipe shows as EPIPE. */
int stdout_reader_gone(void);

/* Checks everything written to stdout at the end of a mode: a reader gone ends the run quietly
 * with status 0, as Unix tools in a pipeline into `head` do; other failures die. */
void finish_stdout(void);

/* Ctrl-C (SIGINT): catch_interrupt has it set a flag, which interrupted() reads, instead of
 * ending the process, so that generation and a chat reply stop where they are and the summary
 * still comes. restart 1: a read or write under way when it comes goes on (a reply's output);
 * 0: it fails with EINTR (chat waiting for the next turn on stdin, which the signal ends). */
void catch_interrupt(int restart);

/* 1 if a Ctrl-C came since the last clear_interrupt (or catch_interrupt's first call). */
int interrupted(void);

void clear_interrupt(void);

/* Writes s to f on one line: a newline as \n, other control bytes (below 0x20, and 0x7F) as \xNN,
 * and, unless raw_high is set, each byte that does not start well-formed UTF-8 as \xNN (raw_high:
 * for a piece, whose bytes may be part of a character spread over tokens). Returns the characters
 * written (a UTF-8 continuation byte starts none), which a table pads to. */
int write_escaped(FILE *f, const char *s, int raw_high);

/* Writes s to stdout as a JSON string (RFC 8259): quotes, backslashes and control bytes escaped,
 * bytes that are not well-formed UTF-8 (possible only in a hand-made vocabulary) as U+FFFD. */
void print_json_string(const char *s);

/* The plural ending of a count: "" for 1 ("1 token"), else "s" ("2 tokens"). */
const char *plural(long n);

/* Dies unless text is valid UTF-8, naming `what` and the first bad byte ("WHAT: not valid UTF-8
 * (byte 0xNN at offset K)"); frees `owned` (may be NULL) first, so that the leak checker of
 * `make sanitize` stays quiet. */
void require_utf8(const char *what, const char *text, char *owned);

/* Reads a whole text file as a NUL-terminated string (malloc'd, the caller frees), or dies naming
 * the file: missing, not a regular file, empty, over 64 MiB, holding a NUL byte, or not valid
 * UTF-8. */
char *read_text(const char *path);

/* Reads stdin to its end as a NUL-terminated string (malloc'd), or dies as read_text does, naming
 * "stdin": a read error, nothing at all, over 64 MiB, a NUL byte, not valid UTF-8. */
char *read_stdin_text(void);

#endif
