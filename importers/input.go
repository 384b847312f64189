package importers

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/zstd"
)

// maxLine bounds one line (an OTLP batch, a HAR document): past it the
// file is refused rather than read into memory.
const maxLine = 256 << 20

// fileSums identify a file: its sha256 as stored (compressed or not),
// its content's (Source.Content) and that content's length, and the
// stored size.
type fileSums struct {
	stored, content   string
	contentSize, size int64
}

// fileSum reads the file's sums in one read: the same log imported
// twice, gzipped or not, is recognised before anything is parsed.
func fileSum(path string) (fileSums, error) {
	raw, ch := sha256.New(), sha256.New()
	norm := &contentHash{h: ch}
	size, err := readContent(path, raw, norm)
	if err != nil {
		return fileSums{}, err
	}
	return fileSums{stored: hex.EncodeToString(raw.Sum(nil)), content: hex.EncodeToString(ch.Sum(nil)),
		contentSize: norm.n, size: size}, nil
}

// readContent copies the file's content (through gzip when it is
// compressed) to content, and its stored bytes to raw; it returns the
// stored size.
func readContent(path string, raw io.Writer, content io.Writer) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	counted := &countingReader{r: io.TeeReader(f, raw)}
	br := bufio.NewReaderSize(counted, 1<<20)
	body, kind, done, err := decompressed(br, path)
	if err != nil {
		return 0, err
	}
	defer done()
	if _, err := io.Copy(content, body); err != nil {
		if kind != "" && errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, fmt.Errorf("read %s: its %s data ends early: the file was cut short (copied before %s finished writing it?): %w", path, kind, kind, err)
		}
		if kind != "" {
			return 0, fmt.Errorf("read %s (%s): %w", path, kind, err)
		}
		return 0, fmt.Errorf("read %s: %w", path, err)
	}
	if _, err := io.Copy(io.Discard, br); err != nil { // what gzip left: still part of the stored bytes
		return 0, fmt.Errorf("read %s: %w", path, err)
	}
	return counted.n.Load(), nil
}

// contentHash hashes text as its lines say it: "\r\n" as "\n", and
// blank space at the very end (a final newline or two) not at all. A
// blank run is held back only up to maxHeldBlank bytes (past that it is
// content, and hashed), so memory and time stay linear whatever the file.
type contentHash struct {
	h    io.Writer
	n    int64  // bytes written to h
	err  error  // the first error h returned
	held []byte // trailing blank space, written once something follows
	cr   bool   // a '\r' withheld: a '\n' next makes it one line end
}

const maxHeldBlank = 64 << 10

func (c *contentHash) Write(p []byte) (int, error) {
	body := len(bytes.TrimRight(p, " \t\r\n"))
	if body == 0 {
		c.held = append(c.held, p...)
		if len(c.held) > maxHeldBlank {
			c.emit(c.held)
			c.held = c.held[:0]
		}
		return len(p), c.err
	}
	c.emit(c.held)
	c.emit(p[:body])
	c.held = append(c.held[:0], p[body:]...)
	return len(p), c.err
}

// emit hashes b with its CRLFs read as LF, across calls.
func (c *contentHash) emit(b []byte) {
	if len(b) == 0 {
		return
	}
	if c.cr {
		c.cr = false
		if b[0] != '\n' {
			c.write([]byte{'\r'})
		}
	}
	if b[len(b)-1] == '\r' {
		c.cr, b = true, b[:len(b)-1]
	}
	c.write(bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n")))
}

func (c *contentHash) write(b []byte) {
	if _, err := c.h.Write(b); err != nil && c.err == nil {
		c.err = err // a hash never fails: prefixHash, to stop the read (errPrefixDone)
	}
	c.n += int64(len(b))
}

// lines reads a file line by line, through gzip when the file starts with
// its magic bytes, counting lines and the stored bytes read so far.
type lines struct {
	f     *os.File
	count *countingReader
	done  func() // releases a decompressor
	r     *bufio.Reader
	line  int64  // number of the line last returned, 1-based
	buf   []byte // a line longer than the reader's buffer
	// cut is the number of the last line if it has no line end (the
	// file was read, or copied, while its writer was writing it); 0:
	// none. Atomic: a decoder reads ahead of the writer that asks.
	cut atomic.Int64
	// Compressed names the compression the file was read through
	// ("gzip", "zstd"), or "".
	Compressed string
	stored     int64
}

// countingReader counts bytes read; the count is atomic because progress
// is reported by the writer while a decoder goroutine reads ahead.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

func openLines(path string) (*lines, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	l := &lines{f: f, count: &countingReader{r: f}}
	br := bufio.NewReaderSize(l.count, 1<<20)
	body, kind, done, err := decompressed(br, path)
	if err != nil {
		f.Close()
		return nil, err
	}
	l.done = done
	if kind != "" {
		l.Compressed = kind
		br = bufio.NewReaderSize(body, 1<<20)
	}
	l.r = br
	return l, nil
}

var zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}

// framedZstd reads length-prefixed zstd messages as lines: each message
// decoded, then a line end.
type framedZstd struct {
	r    *bufio.Reader
	dec  *zstd.Decoder
	line []byte // what is left of the message being read
}

func (f *framedZstd) Read(p []byte) (int, error) {
	for len(f.line) == 0 {
		var size [4]byte
		if _, err := io.ReadFull(f.r, size[:]); err != nil {
			if err == io.EOF {
				return 0, io.EOF
			}
			return 0, io.ErrUnexpectedEOF
		}
		n := binary.BigEndian.Uint32(size[:])
		if n > maxLine {
			return 0, fmt.Errorf("a message of %d bytes: more than the %d MiB a line may hold", n, maxLine>>20)
		}
		frame := make([]byte, n)
		if _, err := io.ReadFull(f.r, frame); err != nil {
			return 0, io.ErrUnexpectedEOF
		}
		msg, err := f.dec.DecodeAll(frame, nil)
		if err != nil {
			return 0, fmt.Errorf("a zstd message: %w", err)
		}
		f.line = append(msg, '\n')
	}
	n := copy(p, f.line)
	f.line = f.line[n:]
	return n, nil
}

// decompressed is the file's content: through gzip or zstd when it starts
// with their magic bytes (kind names which), else br itself. done
// releases the decoder.
func decompressed(br *bufio.Reader, path string) (r io.Reader, kind string, done func(), err error) {
	magic, _ := br.Peek(8)
	switch {
	case len(magic) == 8 && bytes.Equal(magic[4:], zstdMagic):
		// The collector's file exporter with compression set writes each
		// message on its own: a 4-byte big-endian length, then that many
		// bytes of zstd (exportMessageAsBuffer), not one stream.
		dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(128<<20), zstd.WithDecoderMaxMemory(maxLine))
		if err != nil {
			return nil, "", nil, fmt.Errorf("%s: zstd: %w", path, err)
		}
		return &framedZstd{r: br, dec: dec}, "zstd", dec.Close, nil
	case bytes.HasPrefix(magic, []byte{0x1f, 0x8b}):
		gz, err := gzip.NewReader(br)
		if err != nil {
			return nil, "", nil, fmt.Errorf("%s: gzip: %w", path, err)
		}
		return gz, "gzip", func() { gz.Close() }, nil
	case len(magic) >= 2 && magic[0] == 0x78 && bytes.IndexByte([]byte{0x01, 0x9c, 0xda}, magic[1]) >= 0:
		// zlib (RFC 1950: CMF 0x78 and a level's FLG, no preset
		// dictionary), as mitmproxy writes its .zhar; not 0x5e, "x^",
		// which a text log may start with.
		zr, err := zlib.NewReader(br)
		if err != nil {
			return nil, "", nil, fmt.Errorf("%s: zlib: %w", path, err)
		}
		return zr, "zlib", func() { zr.Close() }, nil
	case bytes.HasPrefix(magic, zstdMagic):
		// The collector's file exporter compresses with zstd. Bounded:
		// a hostile frame cannot ask for more than 128 MiB of window.
		zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(128<<20), zstd.WithDecoderMaxMemory(1<<30))
		if err != nil {
			return nil, "", nil, fmt.Errorf("%s: zstd: %w", path, err)
		}
		return zr, "zstd", zr.Close, nil
	}
	return br, "", func() {}, nil
}

// Close closes the file.
func (l *lines) Close() error {
	if l.done != nil {
		l.done()
	}
	return l.f.Close()
}

// Read is the stored (possibly compressed) bytes consumed so far.
func (l *lines) Read() int64 { return l.count.n.Load() }

// Next returns the next line without its line end (LF or CRLF). The slice
// is valid until the next call. It returns io.EOF after the last line; a
// last line without LF is returned normally.
func (l *lines) Next() ([]byte, error) {
	line, err := l.r.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		l.buf = append(l.buf[:0], line...)
		for err == bufio.ErrBufferFull {
			if len(l.buf) > maxLine {
				return nil, fmt.Errorf("line %d is longer than %d MiB", l.line+1, maxLine>>20)
			}
			line, err = l.r.ReadSlice('\n')
			l.buf = append(l.buf, line...)
		}
		line = l.buf
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("line %d: %w", l.line+1, err)
	}
	if len(line) == 0 && errors.Is(err, io.EOF) {
		return nil, io.EOF
	}
	l.line++
	if !bytes.HasSuffix(line, []byte("\n")) {
		l.cut.Store(l.line)
	}
	line = bytes.TrimSuffix(line, []byte("\n"))
	line = bytes.TrimSuffix(line, []byte("\r"))
	return line, nil
}

// Line is the number of the line Next returned last.
func (l *lines) Line() int64 { return l.line }

// Rest reads everything left (for formats that are one JSON document).
func (l *lines) Rest(limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(l.r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("the document is larger than %d MiB", limit>>20)
	}
	return b, nil
}

// head returns the first bytes of a file after decompression, for format
// detection.
func head(path string, n int) ([]byte, error) {
	l, err := openLines(path)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	b, err := l.r.Peek(n)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
		return nil, err
	}
	return append([]byte(nil), b...), nil
}

// errStop ends eachLine early without an error.
var errStop = errors.New("stop")

// eachLine calls fn with every non-blank line of in and its number,
// stopping at the end of the file, when fn returns errStop, at fn's first
// other error, or when ctx is cancelled.
func eachLine(ctx context.Context, in *lines, k *sink, fn func(n int64, line []byte) error) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		line, err := in.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return k.fail(in.Line(), err)
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if err := fn(in.Line(), line); err != nil {
			if errors.Is(err, errStop) {
				return nil
			}
			return err
		}
		k.tick()
	}
}

// notJSON reports whether a line of a JSON Lines file is not a record at
// all (a container runtime's or the server's own output between the
// records): noise. A line that starts like JSON and does not parse is a
// bad record, not noise.
func notJSON(line []byte) bool {
	l := bytes.TrimSpace(line)
	return len(l) > 0 && l[0] != '{' && l[0] != '['
}

// decoded is one line parsed ahead of the writer.
type decoded[T any] struct {
	line  int64
	v     T
	err   error // parse error: the line is bad
	ioErr error // reading failed: the import fails
}

// aheadBatches is how many parsed batches may wait for the writer. Deep
// enough that the decoder, the writer and the inserter do not wait on
// each other's bursts: 200k records, four runs each alternated, 8 → 32
// took own exports 4.66 → 4.45 s and OTLP 9.08 → 8.79 s for ~60 MB more
// resident memory; 128 gained nothing more and doubled it.
const aheadBatches = 32

// aheadBytes bounds the raw bytes of the lines parsed ahead and not yet
// applied, however many batches that is: a file of multi-megabyte OTLP
// lines holds a few, a file of short records up to aheadBatches. (A
// variable so a test can make it small.)
var aheadBytes = 64 << 20

// decodeAhead reads lines and parses them on another goroutine, in
// batches, while apply runs on the caller's goroutine in line order: on
// two cores JSON decoding overlaps the writer's SQLite work. Blank lines
// are skipped. apply may return errStop to end early. At most
// aheadBatches batches of batch lines, and aheadBytes of lines (or one
// batch, if it alone is larger), are held: size batch by how big a parsed
// line is.
func decodeAhead[T any](ctx context.Context, in *lines, k *sink, batch int, parse func(line []byte) (T, error), apply func(n int64, v T, err error) error) error {
	size := batch
	type aheadBatch struct {
		items []decoded[T]
		bytes int
	}
	batches := make(chan aheadBatch, aheadBatches)
	held := newByteBudget(aheadBytes)
	done := make(chan struct{})
	defer close(done)
	defer held.close()
	go func() {
		defer close(batches)
		cur := aheadBatch{items: make([]decoded[T], 0, size)}
		send := func() bool {
			if !held.take(cur.bytes) {
				return false
			}
			select {
			case batches <- cur:
				cur = aheadBatch{items: make([]decoded[T], 0, size)}
				return true
			case <-done:
				return false
			}
		}
		for {
			line, err := in.Next()
			if errors.Is(err, io.EOF) {
				send()
				return
			}
			d := decoded[T]{line: in.Line(), ioErr: err}
			if err == nil {
				if len(bytes.TrimSpace(line)) == 0 {
					continue
				}
				d.v, d.err = parse(line)
				cur.bytes += len(line)
			}
			cur.items = append(cur.items, d)
			if (len(cur.items) == cap(cur.items) || err != nil) && !send() {
				return
			}
			if err != nil {
				return
			}
		}
	}()
	for b := range batches {
		if err := ctx.Err(); err != nil {
			return err
		}
		for _, d := range b.items {
			if d.ioErr != nil {
				return k.fail(d.line, d.ioErr)
			}
			if err := apply(d.line, d.v, d.err); err != nil {
				if errors.Is(err, errStop) {
					return nil
				}
				return err
			}
			k.tick()
		}
		held.give(b.bytes)
	}
	return ctx.Err()
}

// byteBudget counts bytes held, up to a limit: take waits for room (or
// takes anything when nothing is held, so one oversized batch still
// passes) until close.
type byteBudget struct {
	mu     sync.Mutex
	room   *sync.Cond
	held   int
	limit  int
	closed bool
}

func newByteBudget(limit int) *byteBudget {
	b := &byteBudget{limit: limit}
	b.room = sync.NewCond(&b.mu)
	return b
}

// take waits until n bytes fit, and reports false once closed.
func (b *byteBudget) take(n int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for !b.closed && b.held > 0 && b.held+n > b.limit {
		b.room.Wait()
	}
	if b.closed {
		return false
	}
	b.held += n
	return true
}

func (b *byteBudget) give(n int) {
	b.mu.Lock()
	b.held -= n
	b.mu.Unlock()
	b.room.Broadcast()
}

func (b *byteBudget) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.room.Broadcast()
}

// Peek returns up to n bytes ahead without consuming them.
func (l *lines) Peek(n int) ([]byte, error) { return l.r.Peek(n) }

// firstLine is b up to its first line end.
func firstLine(b []byte) []byte {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return b[:i]
	}
	return b
}
