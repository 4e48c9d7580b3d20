/* build/chat_render: chat_template.c without a model, for tests/test_chat_template.py, which
 * holds its output to Jinja's rendering of real templates.
 *
 *   chat_render render FAMILY BOS EOS ADD_GENERATION_PROMPT  < messages
 *       stdin: role, NUL, content, NUL, for each message; stdout: the rendering
 *   chat_render recognize  < template      stdout: the family's name, or "none"
 *   chat_render end-of-turn FAMILY BOS EOS stdout: the text that ends a reply
 * Exit status 2 on bad usage or input, 1 out of memory.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_template.h"

static char *read_all(FILE *f, size_t *len) {
    size_t cap = 4096, n = 0, got;
    char *s = malloc(cap + 1);
    while (s && (got = fread(s + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) s = realloc(s, (cap *= 2) + 1);
    }
    if (s) s[n] = '\0';
    *len = n;
    return s;
}

static int family(const char *name) {
    int t = chat_template_from_name(name);
    if (t < 0) {
        fprintf(stderr, "chat_render: no family %s (%s)\n", name, chat_template_names());
        exit(2);
    }
    return t;
}

int main(int argc, char **argv) {
    size_t len;
    if (argc == 2 && strcmp(argv[1], "recognize") == 0) {
        char *tmpl = read_all(stdin, &len);
        if (!tmpl) return 1;
        int t = chat_template_recognize(tmpl);
        puts(t < 0 ? "none" : chat_template_name(t));
        free(tmpl);
        return 0;
    }
    if (argc == 5 && strcmp(argv[1], "end-of-turn") == 0) {
        ChatTokens tokens = {argv[3], argv[4]};
        fputs(chat_template_end_of_turn(family(argv[2]), &tokens), stdout);
        return 0;
    }
    if (argc != 6 || strcmp(argv[1], "render") != 0) {
        fprintf(stderr, "usage: chat_render render FAMILY BOS EOS 0|1 | recognize | "
                        "end-of-turn FAMILY BOS EOS\n");
        return 2;
    }
    ChatTokens tokens = {argv[3], argv[4]};
    char *in = read_all(stdin, &len);
    ChatMessage *m = malloc((len / 2 + 1) * sizeof(*m));
    if (!in || !m) return 1;
    int n = 0;
    for (size_t at = 0; at < len; n++) {
        m[n].role = in + at;
        at += strlen(in + at) + 1;
        if (at >= len) {
            fprintf(stderr, "chat_render: message %d has a role and no content\n", n);
            return 2;
        }
        m[n].content = in + at;
        at += strlen(in + at) + 1;
    }
    char *text = chat_template_render(family(argv[2]), m, n, argv[5][0] == '1', &tokens);
    if (!text) return 1;
    fputs(text, stdout);
    free(text);
    free(m);
    free(in);
    return 0;
}
