package mcptool

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/microbox/microbox/result"
)

// fetchedSummary tells a client that reads only the text which files came
// back (their bytes are in the structured result's "fetched") and why any
// did not.
func fetchedSummary(b *strings.Builder, fetched map[string]*result.Fetched) {
	if len(fetched) == 0 {
		return
	}
	b.WriteString("--- fetched (contents in the structured result's \"fetched\", base64)\n")
	for _, name := range slices.Sorted(maps.Keys(fetched)) {
		if f := fetched[name]; f.Error != "" {
			fmt.Fprintf(b, "%s: %s\n", name, f.Error)
		} else {
			fmt.Fprintf(b, "%s: %d bytes\n", name, len(f.Data))
		}
	}
}
