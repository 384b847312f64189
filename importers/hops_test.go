package importers

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mcpdup/mcpdup/activity"
)

// TestRequestSeenAtTwoHopsIsOneSend: Istio logs a request on both sides
// (the caller's sidecar, then the target's, under one x-request-id, the
// second within the first's time): one send. A resend under the same id
// after the first ended, or a short JSON-RPC id that other sessions use
// too, are sends of their own.
func TestRequestSeenAtTwoHopsIsOneSend(t *testing.T) {
	// istio.io content/en/docs/tasks/observability/logs/access-log: the
	// sleep pod's sidecar, then httpbin's.
	mesh := `[2020-11-25T21:26:18.409Z] "GET /status/418 HTTP/1.1" 418 - via_upstream - "-" 0 135 4 4 "-" "curl/7.73.0-DEV" "84961386-6d84-929d-98bd-c5aee93b5c88" "httpbin:8000" "10.44.1.27:80" outbound|8000||httpbin.foo.svc.cluster.local 10.44.1.23:37652 10.0.45.184:8000 10.44.1.23:46520 - default
[2020-11-25T21:26:18.409Z] "GET /status/418 HTTP/1.1" 418 - via_upstream - "-" 0 135 3 1 "-" "curl/7.73.0-DEV" "84961386-6d84-929d-98bd-c5aee93b5c88" "httpbin:8000" "127.0.0.1:80" inbound|8000|| 127.0.0.1:41854 10.44.1.27:80 10.44.1.23:37652 outbound_.8000_._.httpbin.foo.svc.cluster.local default
`
	resend := `[2026-03-02T10:15:04.512Z] "POST /v1/payments HTTP/1.1" 504 UT 312 24 15001 - "203.0.113.7" "agent" "6f1c2b9e-3d4a-4e5f-9a8b-7c6d5e4f3a21" "pay.example.com" "10.0.4.12:8080"
[2026-03-02T10:15:21.020Z] "POST /v1/payments HTTP/1.1" 201 - 312 95 180 178 "203.0.113.7" "agent" "6f1c2b9e-3d4a-4e5f-9a8b-7c6d5e4f3a21" "pay.example.com" "10.0.4.12:8080"
`
	// The target's sidecar started 1 ms later and took as long, each
	// logged in whole milliseconds: its line ends 1 ms after the first's.
	rounded := `[2026-03-02T10:15:04.409Z] "POST /v1/payments HTTP/1.1" 201 - via_upstream - "-" 312 135 40 39 "-" "agent/1.0" "84961386-6d84-929d-98bd-c5aee93b5c88" "payments:8000" "10.44.1.27:80" outbound|8000||payments.foo.svc.cluster.local 10.44.1.23:37652 10.0.45.184:8000 10.44.1.23:46520 - default
[2026-03-02T10:15:04.410Z] "POST /v1/payments HTTP/1.1" 201 - via_upstream - "-" 312 135 40 39 "-" "agent/1.0" "84961386-6d84-929d-98bd-c5aee93b5c88" "payments:8000" "127.0.0.1:80" inbound|8000|| 127.0.0.1:41854 10.44.1.27:80 10.44.1.23:37652 outbound_.8000_._.payments.foo.svc.cluster.local default
`
	// Refused at once (503 UF, 1 ms), and the client's resend 4 ms after
	// the first began, under the same id: the two do not overlap.
	fastResend := `[2026-03-02T10:15:04.000Z] "POST /v1/payments HTTP/1.1" 503 UF 312 24 1 - "203.0.113.7" "agent" "6f1c2b9e-3d4a-4e5f-9a8b-7c6d5e4f3a21" "pay.example.com" "10.0.4.12:8080"
[2026-03-02T10:15:04.004Z] "POST /v1/payments HTTP/1.1" 201 - 312 24 180 178 "203.0.113.7" "agent" "6f1c2b9e-3d4a-4e5f-9a8b-7c6d5e4f3a21" "pay.example.com" "10.0.4.12:8080"
`
	shortIDs := `{"start_time":"2026-03-02T10:15:04.000Z","method":"POST","x-envoy-origin-path":"/mcp","response_code":200,":authority":"mcp.example","upstream_host":"10.0.4.12:8080","duration":900,"jsonrpc.request.id":"3","mcp.method.name":"tools/call","mcp.tool.name":"create_ticket"}
{"start_time":"2026-03-02T10:15:04.100Z","method":"POST","x-envoy-origin-path":"/mcp","response_code":200,":authority":"mcp.example","upstream_host":"10.0.4.12:8080","duration":300,"jsonrpc.request.id":"3","mcp.method.name":"tools/call","mcp.tool.name":"create_ticket"}
`
	// One sidecar's two sends under the id the app propagates (Istio's
	// FAQ asks apps to forward x-request-id), the second while the first
	// still waited for its 15 s timeout; lines written as each ended.
	propagated := `[2026-11-28T13:00:16.000Z] "POST /v1/payments HTTP/1.1" 200 - via_upstream - "-" 212 97 842 840 "-" "python-requests/2.31.0" "84961386-6d84-929d-98bd-c5aee93b5c88" "payments:8000" "10.44.1.27:8000" outbound|8000||payments.prod.svc.cluster.local 10.44.1.23:37700 10.0.45.184:8000 10.44.1.23:46600 - default
[2026-11-28T13:00:10.000Z] "POST /v1/payments HTTP/1.1" 504 UT response_timeout - "-" 212 24 15001 - "-" "python-requests/2.31.0" "84961386-6d84-929d-98bd-c5aee93b5c88" "payments:8000" "10.44.1.27:8000" outbound|8000||payments.prod.svc.cluster.local 10.44.1.23:37652 10.0.45.184:8000 10.44.1.23:46520 - default
`
	// The same through Envoy's default format (no cluster): the client
	// reused its request id, to the same upstream; then a client hedging
	// to a second replica a second later, cancelling the first (DC).
	reused := `[2026-11-28T13:00:16.000Z] "POST /v1/payments HTTP/1.1" 200 - 212 97 842 840 "10.0.4.12" "ops-agent/2.1" "0c3f4e3a-8a73-4a53-b0ad-42b1d7b0a9e1" "pay.example.com" "10.244.0.7:8443"
[2026-11-28T13:00:10.000Z] "POST /v1/payments HTTP/1.1" 504 UT 212 24 15001 - "10.0.4.12" "ops-agent/2.1" "0c3f4e3a-8a73-4a53-b0ad-42b1d7b0a9e1" "pay.example.com" "10.244.0.7:8443"
`
	hedged := `[2026-11-28T13:00:11.000Z] "POST /v1/payments HTTP/2" 201 - 212 97 800 798 "-" "checkout/3.4 grpc-go" "84961386-6d84-929d-98bd-c5aee93b5c88" "payments:8000" "10.44.1.27:8000"
[2026-11-28T13:00:10.000Z] "POST /v1/payments HTTP/2" 0 DC 212 0 1801 - "-" "checkout/3.4 grpc-go" "84961386-6d84-929d-98bd-c5aee93b5c88" "payments:8000" "10.44.1.28:8000"
`
	for _, c := range []struct {
		name, log string
		sends     int64
	}{{"two hops", mesh, 1}, {"two hops, each line rounded to the ms", rounded, 1}, {"a resend after the first ended", resend, 2}, {"a refused send, then a resend 4 ms after it began", fastResend, 2}, {"JSON-RPC ids of two sessions", shortIDs, 2},
		{"one sidecar's resend under a propagated id", propagated, 2}, {"a resend under a reused id, one upstream", reused, 2}, {"a hedge to another replica", hedged, 2}} {
		rep, err := Import(ctx, newStore(t), writeFile(t, "access.log", []byte(c.log)), Options{Format: "envoy"})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Executions != c.sends {
			t.Errorf("%s: %d executions, want %d (%s)", c.name, rep.Executions, c.sends, rep.Note)
		}
		if hop := strings.Contains(rep.Note, "logged again by another proxy"); hop != (c.sends == 1) {
			t.Errorf("%s: the note says %q", c.name, rep.Note)
		}
	}
}

// TestRequestLoggedInTwoFilesIsOneSend: each sidecar writes its own log,
// so a request's two lines are in two files, imported together or apart,
// in either order: one send. A resend under the same id in another file
// stays a send; a longer copy of a log imported before adds only its new
// lines.
func TestRequestLoggedInTwoFilesIsOneSend(t *testing.T) {
	// istio.io's pair again: the sleep pod's sidecar, then httpbin's.
	client := `[2020-11-25T21:26:18.409Z] "GET /status/418 HTTP/1.1" 418 - via_upstream - "-" 0 135 4 4 "-" "curl/7.73.0-DEV" "84961386-6d84-929d-98bd-c5aee93b5c88" "httpbin:8000" "10.44.1.27:80" outbound|8000||httpbin.foo.svc.cluster.local 10.44.1.23:37652 10.0.45.184:8000 10.44.1.23:46520 - default
`
	server := `[2020-11-25T21:26:18.409Z] "GET /status/418 HTTP/1.1" 418 - via_upstream - "-" 0 135 3 1 "-" "curl/7.73.0-DEV" "84961386-6d84-929d-98bd-c5aee93b5c88" "httpbin:8000" "127.0.0.1:80" inbound|8000|| 127.0.0.1:41854 10.44.1.27:80 10.44.1.23:37652 outbound_.8000_._.httpbin.foo.svc.cluster.local default
`
	first := `[2026-03-02T10:15:04.512Z] "POST /v1/payments HTTP/1.1" 504 UT 312 24 15001 - "203.0.113.7" "agent" "6f1c2b9e-3d4a-4e5f-9a8b-7c6d5e4f3a21" "pay.example.com" "10.0.4.12:8080"
`
	resend := `[2026-03-02T10:15:21.020Z] "POST /v1/payments HTTP/1.1" 201 - 312 95 180 178 "203.0.113.7" "agent" "6f1c2b9e-3d4a-4e5f-9a8b-7c6d5e4f3a21" "pay.example.com" "10.0.4.12:8080"
`
	// A facade's POST /v1/payments, and the payments service's own POST
	// /payments, made under the x-request-id it propagates (as Istio asks
	// of apps): two requests, whatever the hosts.
	facade := `[2026-03-02T10:15:04.000Z] "POST /v1/payments HTTP/1.1" 201 - 312 24 300 298 "203.0.113.7" "agent" "6f1c2b9e-3d4a-4e5f-9a8b-7c6d5e4f3a21" "api.example.com" "10.0.4.12:8080"
`
	service := `[2026-03-02T10:15:04.050Z] "POST /payments HTTP/1.1" 201 - 312 24 100 98 "203.0.113.7" "agent" "6f1c2b9e-3d4a-4e5f-9a8b-7c6d5e4f3a21" "payments:8000" "10.0.4.13:8080"
`
	// Traefik at the edge (keeping X-Request-Id, as its preset says), then
	// the payments pod's sidecar: one request, two producers' logs.
	edge := `{"StartUTC":"2026-03-02T10:15:04.400Z","Duration":60000000,"ClientHost":"203.0.113.7","RequestMethod":"POST","RequestHost":"pay.example.com","RequestPath":"/v1/payments","DownstreamStatus":201,"OriginStatus":201,"ServiceURL":"http://10.44.1.27:8000","RetryAttempts":0,"request_X-Request-Id":"6f1c2b9e-3d4a-4e5f-9a8b-7c6d5e4f3a21"}
`
	sidecar := `[2026-03-02T10:15:04.420Z] "POST /v1/payments HTTP/1.1" 201 - via_upstream - "-" 312 135 30 29 "203.0.113.7" "agent" "6f1c2b9e-3d4a-4e5f-9a8b-7c6d5e4f3a21" "payments:8000" "127.0.0.1:8000" inbound|8000|| 127.0.0.1:41854 10.44.1.27:8000 10.44.1.23:37652 outbound_.8000_._.payments.foo.svc.cluster.local default
`
	// ingress-nginx at the edge (its documented JSON log-format-upstream:
	// whole seconds, written as the request ended 2.502 s after it
	// began), then the ticket pod's Istio sidecar (JSON, ms).
	ingress := `{"time": "2026-11-28T11:00:07+00:00", "remote_addr": "10.0.4.12", "x-forward-for": "10.0.4.12", "request_id": "9c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f", "remote_user": "", "bytes_sent": 412, "request_time": 2.502, "status": 201, "vhost": "tickets.example.com", "request_proto": "HTTP/1.1", "path": "/v1/tickets", "request_query": "", "request_length": 512, "duration": 2.502, "method": "POST", "http_referrer": "", "http_user_agent": "ops-agent/2.1"}
`
	podSidecar := `{"authority":"tickets.example.com","bytes_received":212,"bytes_sent":87,"connection_termination_details":null,"downstream_local_address":"10.244.1.5:8080","downstream_remote_address":"10.244.0.30:51234","duration":2480,"method":"POST","path":"/v1/tickets","protocol":"HTTP/1.1","request_id":"9c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f","requested_server_name":null,"response_code":201,"response_code_details":"via_upstream","response_flags":"-","route_name":"default","start_time":"2026-11-28T11:00:05.010Z","upstream_cluster":"inbound|8080||","upstream_host":"10.244.1.5:8080","upstream_local_address":"127.0.0.6:40001","upstream_service_time":"2478","upstream_transport_failure_reason":null,"user_agent":"ops-agent/2.1","x_forwarded_for":"10.0.4.12"}
`
	// Two Envoy replicas' files: a send reset after 2 ms (503 UC), and the
	// client's resend 1 ms later through the other replica under the
	// same x-request-id (kept from the client), answered 201: the refused
	// line lies within the success's time, but a 201 relays no reset.
	replicaA := `[2026-03-10T09:15:04.200Z] "POST /v1/deployments HTTP/1.1" 503 UC 312 95 2 - "10.8.0.21" "agent-runner/1.4" "9e7c1d2a-0b3f-4c55-8a61-2f4d9e0c7b13" "deploy-api" "10.8.3.14:8080"
`
	replicaB := `[2026-03-10T09:15:04.201Z] "POST /v1/deployments HTTP/1.1" 201 - 312 140 38 37 "10.8.0.21" "agent-runner/1.4" "9e7c1d2a-0b3f-4c55-8a61-2f4d9e0c7b13" "deploy-api" "10.8.3.14:8080"
`
	rootFacade := strings.Replace(facade, "/v1/payments", "/rpc/", 1)
	rootService := strings.Replace(service, "/payments", "/", 1)
	resolve := func(t *testing.T, s *activity.Store) {
		ex, err := s.Executions(ctx, activity.ExecutionFilter{})
		if err != nil || len(ex) != 1 {
			t.Fatalf("executions before the resolution: %d, %v", len(ex), err)
		}
		if _, _, err := s.Resolve(ctx, activity.Resolution{ExecutionID: ex[0].ID, Outcome: activity.ResolutionVerified, Operator: "ops", Note: "found in the ledger"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name    string
		files   []string
		sends   int64
		note    string                                // in the last file's note
		between func(t *testing.T, s *activity.Store) // after the first file
	}{
		{"client's sidecar, then the server's", []string{client, server}, 1, "logged again by another proxy", nil},
		{"server's sidecar, then the client's", []string{server, client}, 1, "logged again by another proxy", nil},
		{"a resend in another file", []string{first, resend}, 2, "", nil},
		{"a longer copy of a log", []string{first, first + resend}, 2, "a shorter copy of this log", nil},
		{"exports of a log that overlap", []string{client + first, first + resend}, 3, "1 lines a file imported before holds already", nil},
		{"another service's path under the propagated id", []string{facade, service}, 2, "", nil},
		{"Traefik at the edge, then the target's sidecar", []string{edge, sidecar}, 1, "logged again by another proxy", nil},
		{"a root path under the propagated id", []string{rootFacade, rootService}, 2, "", nil},
		{"ingress-nginx at the edge, then the target's sidecar", []string{ingress, podSidecar}, 1, "logged again by another proxy", nil},
		{"the target's sidecar, then ingress-nginx at the edge", []string{podSidecar, ingress}, 1, "logged again by another proxy", nil},
		{"a reset, then the client's resend under its request id through another replica", []string{replicaA, replicaB}, 2, "", nil},
		{"the resend's replica first", []string{replicaB, replicaA}, 2, "", nil},
		// The operator's resolution, later, is no part of the first
		// request's time: the resend after it is a send.
		{"the first resolved by an operator, then the resend's file", []string{first, resend}, 2, "", resolve},
	} {
		s := newStore(t)
		var sends int64
		var note string
		for i, f := range c.files {
			rep, err := Import(ctx, s, writeFile(t, fmt.Sprintf("access-%d.log", i), []byte(f)), Options{})
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			sends, note = sends+rep.Executions, rep.Note
			if i == 0 && c.between != nil {
				c.between(t, s)
			}
		}
		if sends != c.sends {
			t.Errorf("%s: %d executions, want %d (%s)", c.name, sends, c.sends, note)
		}
		if c.note == "" && strings.Contains(note, "imported before") || c.note != "" && !strings.Contains(note, c.note) {
			t.Errorf("%s: the note says %q", c.name, note)
		}
	}
}

// TestDryRunSeesTheOtherSidecarsLog: a dry run of the target's sidecar
// log beside a database holding the caller's says what the import will
// do: nothing new, the request is held already.
func TestDryRunSeesTheOtherSidecarsLog(t *testing.T) {
	client := `[2020-11-25T21:26:18.409Z] "POST /status/418 HTTP/1.1" 418 - via_upstream - "-" 0 135 4 4 "-" "curl/7.73.0-DEV" "84961386-6d84-929d-98bd-c5aee93b5c88" "httpbin:8000" "10.44.1.27:80" outbound|8000||httpbin.foo.svc.cluster.local 10.44.1.23:37652 10.0.45.184:8000 10.44.1.23:46520 - default
`
	server := `[2020-11-25T21:26:18.409Z] "POST /status/418 HTTP/1.1" 418 - via_upstream - "-" 0 135 3 1 "-" "curl/7.73.0-DEV" "84961386-6d84-929d-98bd-c5aee93b5c88" "httpbin:8000" "127.0.0.1:80" inbound|8000|| 127.0.0.1:41854 10.44.1.27:80 10.44.1.23:37652 outbound_.8000_._.httpbin.foo.svc.cluster.local default
`
	real := newStore(t)
	if _, err := Import(ctx, real, writeFile(t, "client.log", []byte(client)), Options{}); err != nil {
		t.Fatal(err)
	}
	path := writeFile(t, "server.log", []byte(server))
	dry, err := Import(ctx, newStore(t), path, Options{DryRun: true, SeenIn: real})
	if err != nil {
		t.Fatal(err)
	}
	wet, err := Import(ctx, real, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if dry.Executions != 0 || wet.Executions != 0 {
		t.Errorf("the target's sidecar log: the dry run says %d executions, the import adds %d; want 0 and 0", dry.Executions, wet.Executions)
	}
}

// TestOnlyTheVeryLineIsAShippersRepeat: a log shipper that delivers at
// least once writes a line twice, byte for byte: one send. Two sends
// under a request id the proxy keeps from the client (ingress-nginx's
// $req_id), logged in the same whole second with the same times, status
// and upstream, differ somewhere else (a request length, an upstream
// time): two sends, not a repeat.
func TestOnlyTheVeryLineIsAShippersRepeat(t *testing.T) {
	first := `10.244.1.7 - - [10/Mar/2026:10:15:04 +0100] "POST /v1/payouts HTTP/1.1" 201 88 "-" "python-requests/2.31.0" 412 0.041 [payments-payouts-8080] [] 10.244.3.22:8080 88 0.040 201 7f3c9a1be2d54c0a9b6e1f2d3c4b5a69`
	resend := `10.244.1.7 - - [10/Mar/2026:10:15:04 +0100] "POST /v1/payouts HTTP/1.1" 201 88 "-" "python-requests/2.31.0" 431 0.041 [payments-payouts-8080] [] 10.244.3.22:8080 88 0.039 201 7f3c9a1be2d54c0a9b6e1f2d3c4b5a69`
	for _, c := range []struct {
		name, log string
		sends     int64
		repeat    bool
	}{{"the line twice", first + "\n" + first + "\n", 1, true}, {"the line twice, one with a trailing space", first + " \n" + first + "\n", 1, true},
		{"two lines alike but for the request length and upstream time", first + "\n" + resend + "\n", 2, false}} {
		rep, err := Import(ctx, newStore(t), writeFile(t, "access.log", []byte(c.log)), Options{Format: "nginx"})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Executions != c.sends {
			t.Errorf("%s: %d executions, want %d (%s)", c.name, rep.Executions, c.sends, rep.Note)
		}
		if said := strings.Contains(rep.Note, "repeat an earlier line of this file byte for byte"); said != c.repeat {
			t.Errorf("%s: the note says %q", c.name, rep.Note)
		}
	}
}
