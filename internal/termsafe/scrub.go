package termsafe

import "reflect"

// Scrub escapes, in place, every string reachable from v (a pointer, a
// slice or a map): struct fields, slice and array elements, map values,
// byte slices such as json.RawMessage. It is for data about to be shown
// styled (the console's rows): Styled lets SGR through for the program's
// own colours, so data must arrive with its escapes already visible.
// Strings without unsafe characters are left as they are, so ids of real
// records are unchanged. Unexported fields are not reached.
func Scrub(v any) {
	s := scrubber{seen: map[uintptr]bool{}}
	s.walk(reflect.ValueOf(v), 0)
}

type scrubber struct {
	seen map[uintptr]bool
}

// maxScrubDepth bounds the walk; the model's types nest a few levels.
const maxScrubDepth = 32

var bytesType = reflect.TypeOf([]byte(nil))

func (s *scrubber) walk(v reflect.Value, depth int) {
	if !v.IsValid() || depth > maxScrubDepth {
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() || s.seen[v.Pointer()] {
			return
		}
		s.seen[v.Pointer()] = true
		s.walk(v.Elem(), depth+1)
	case reflect.Interface:
		if v.IsNil() {
			return
		}
		e := v.Elem()
		if e.Kind() == reflect.String && v.CanSet() {
			if c := String(e.String()); c != e.String() {
				v.Set(reflect.ValueOf(c).Convert(e.Type()))
			}
			return
		}
		s.walk(e, depth+1)
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Field(i); f.CanSet() {
				s.walk(f, depth+1)
			}
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			if v.CanSet() && !v.IsNil() {
				if c := String(string(v.Bytes())); c != string(v.Bytes()) {
					v.Set(reflect.ValueOf([]byte(c)).Convert(v.Type()))
				}
			}
			return
		}
		for i := range v.Len() {
			s.walk(v.Index(i), depth+1)
		}
	case reflect.Array:
		for i := range v.Len() {
			s.walk(v.Index(i), depth+1)
		}
	case reflect.Map:
		if v.IsNil() {
			return
		}
		iter := v.MapRange()
		for iter.Next() {
			val := reflect.New(v.Type().Elem()).Elem()
			val.Set(iter.Value())
			s.walk(val, depth+1)
			v.SetMapIndex(iter.Key(), val)
		}
	case reflect.String:
		if v.CanSet() {
			if c := String(v.String()); c != v.String() {
				v.SetString(c)
			}
		}
	}
}
