package gatewaylite

import (
	"fmt"
	"testing"
)

// TestResultCacheBoundedByBytes: the cache holds at most resultCacheBytes
// of results however large each is (it held 256 whatever their size), and
// one too large for it is not held at all.
func TestResultCacheBoundedByBytes(t *testing.T) {
	var c resultCache
	big := make([]byte, 3<<20)
	for i := range 100 {
		c.put(fmt.Sprintf("sha256:%d", i), big)
		if c.bytes > resultCacheBytes {
			t.Fatalf("after %d results the cache holds %d bytes", i+1, c.bytes)
		}
	}
	if _, ok := c.get("sha256:99"); !ok {
		t.Fatal("the newest result is not held")
	}
	c.put("sha256:huge", make([]byte, resultCacheBytes))
	if _, ok := c.get("sha256:huge"); ok {
		t.Fatal("a result past a quarter of the bound was held")
	}
	n := 0
	for range c.data {
		n++
	}
	if n != len(c.refs) {
		t.Fatalf("%d held, %d listed", n, len(c.refs))
	}
}
