package canon

import (
	"bytes"
	"encoding/json"
	"testing"
)

// benchDoc is shaped like a log record's payload: an execution with
// nested arguments, times, numbers and an escaped string.
var benchDoc = []byte(`{"id":"act_01JD8Q4ZK3W5X7Y9A1B3C5D7E9","actor":"agent:deployer","tool":"deploy_release","channel":"http",
"target":"http://127.0.0.1:9400/v1/releases","method":"POST","credential_ref":"deploy-service",
"arguments":{"version":"2.4.1","service":"billing","region":"us-east-1","replicas":3,"canary":{"percent":12.5,"steps":[1,5,25,100]}},
"intent_scope":"run:run_01JD8Q4ZK3W5X7Y9A1B3C5D7E9","fingerprint":"hmac-sha256:9f2c4d1e8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d",
"fingerprint_key_id":"fp1","contract":"repeatable_with_key","created_by_call":"call_01JD8Q4ZK3W5X7Y9A1B3C5D7E9","window_ns":3600000000000,
"note":"line one\nline \"two\"","times":{"accepted":"2026-11-30T10:00:00.123456789Z","dispatched":"2026-11-30T10:00:00.125Z"}}`)

// BenchmarkTransform runs the canonical transform and, side by side on the
// same bytes, encoding/json's Compact (validation and copying, no
// sorting): the ratio is what canonical form costs over merely reading.
//
//	go test ./activity/canon -run '^$' -bench Transform
func BenchmarkTransform(b *testing.B) {
	b.Run("canon.Transform", func(b *testing.B) {
		b.SetBytes(int64(len(benchDoc)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Transform(benchDoc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json.Compact", func(b *testing.B) {
		b.SetBytes(int64(len(benchDoc)))
		b.ReportAllocs()
		var buf bytes.Buffer
		for b.Loop() {
			buf.Reset()
			if err := json.Compact(&buf, benchDoc); err != nil {
				b.Fatal(err)
			}
		}
	})
}
