package termsafe

import "reflect"

// Scrub escapes, in place, every string reachable from v (a pointer, a
// slice or a map): struct fields, slice and array elements, map values,
// byte slices such as json.RawMessage. It is for data about to be shown
// styled (the console's rows): Styled lets SGR through for the program's
// own colours, so data must arrive with its escapes already visible.
// Strings without unsafe characters are left as they are, so ids of real
// records are unchanged. Map keys are escaped too (two keys that escape
// alike cannot both come from real records). Unexported fields are not
// reached, nor strings inside a struct held by value in an interface.
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
		type entry struct{ k, v reflect.Value }
		var entries []entry
		iter := v.MapRange()
		for iter.Next() {
			k := reflect.New(v.Type().Key()).Elem()
			k.Set(iter.Key())
			val := reflect.New(v.Type().Elem()).Elem()
			val.Set(iter.Value())
			entries = append(entries, entry{k, val})
		}
		for _, e := range entries {
			old := reflect.New(v.Type().Key()).Elem()
			old.Set(e.k)
			s.walk(e.k, depth+1) // a key is shown too (a state by execution id)
			s.walk(e.v, depth+1)
			if !e.k.Equal(old) {
				v.SetMapIndex(old, reflect.Value{})
			}
			v.SetMapIndex(e.k, e.v)
		}
	case reflect.String:
		if v.CanSet() {
			if c := String(v.String()); c != v.String() {
				v.SetString(c)
			}
		}
	}
}
