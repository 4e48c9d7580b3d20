/* dtypes: dtype.h's table as JSON, one object per weight dtype and line, in code order:
 *   {"name": "q8_0", "code": 2, "group_sizes": [32, 64]}
 * group_sizes is empty for a dtype without groups. The Python side of the file format keeps a
 * table of its own and is checked against this one (build/dtypes, make test). */
#include <stdio.h>

#include "dtype.h"

int main(void) {
    for (int d = 0; d < N_DTYPES; d++) {
        if (DTYPES[d].kind == TENSOR_GGUF) continue; /* no normllama file holds a K-quant */
        printf("{\"name\": \"%s\", \"code\": %d, \"group_sizes\": [", DTYPES[d].name, d);
        for (int i = 0; i < MAX_GROUP_SIZES && DTYPES[d].group_sizes[i] != 0; i++)
            printf("%s%d", i ? ", " : "", DTYPES[d].group_sizes[i]);
        printf("]}\n");
    }
    return 0;
}
