package limits

import (
	"reflect"
	"strconv"
)

// unset removes the value at path from rv (an addressable struct).
func unset(rv reflect.Value, path []string) {
	if len(path) == 0 {
		rv.SetZero()
		return
	}
	switch rv.Kind() {
	case reflect.Pointer:
		if !rv.IsNil() {
			unset(rv.Elem(), path)
		}
	case reflect.Struct:
		i, ok := fieldIndex(rv.Type())[path[0]]
		if !ok {
			return
		}
		if len(path) == 1 {
			rv.Field(i).SetZero()
			return
		}
		unset(rv.Field(i), path[1:])
	case reflect.Slice:
		// A bad element is blanked here and dropped by prune, so the indexes
		// of the other problems stay right.
		i, err := strconv.Atoi(path[0])
		if err != nil || i < 0 || i >= rv.Len() || len(path) != 1 {
			return
		}
		rv.Index(i).SetZero()
	case reflect.Map:
		if rv.IsNil() {
			return
		}
		key := reflect.ValueOf(path[0]).Convert(rv.Type().Key())
		if len(path) == 1 {
			rv.SetMapIndex(key, reflect.Value{})
			return
		}
		cur := rv.MapIndex(key)
		if !cur.IsValid() {
			return
		}
		ev := reflect.New(rv.Type().Elem()).Elem()
		ev.Set(cur)
		unset(ev, path[1:])
		rv.SetMapIndex(key, ev)
	}
}

// prune normalises rv (an addressable struct): map entries whose value is
// an empty struct are dropped, empty maps become nil, and so does a pointer
// to a struct that is empty once pruned ("shadow": {}).
func prune(rv reflect.Value) {
	for i := range rv.NumField() {
		f := rv.Field(i)
		if f.Kind() == reflect.Pointer && !f.IsNil() && f.Elem().Kind() == reflect.Struct {
			prune(f.Elem())
			if f.Elem().IsZero() {
				f.SetZero()
			}
			continue
		}
		if f.Kind() != reflect.Map || f.IsNil() {
			continue
		}
		if f.Type().Elem().Kind() == reflect.Struct {
			// Collect first: the map is not changed while it is ranged over.
			var keys, vals []reflect.Value
			iter := f.MapRange()
			for iter.Next() {
				ev := reflect.New(f.Type().Elem()).Elem()
				ev.Set(iter.Value())
				prune(ev)
				keys, vals = append(keys, iter.Key()), append(vals, ev)
			}
			for i, k := range keys {
				if vals[i].IsZero() {
					f.SetMapIndex(k, reflect.Value{})
				} else {
					f.SetMapIndex(k, vals[i])
				}
			}
		}
		if f.Len() == 0 {
			f.SetZero()
		}
	}
}

// pruneSlices drops the zero elements of rv's slice fields (blanked by unset)
// and makes an empty slice nil. Only the lenient reader calls it: the strict
// one reports an empty element instead.
func pruneSlices(rv reflect.Value) {
	for i := range rv.NumField() {
		if f := rv.Field(i); f.Kind() == reflect.Slice && !f.IsNil() {
			pruneSlice(f)
		}
	}
}

func pruneSlice(f reflect.Value) {
	kept := reflect.MakeSlice(f.Type(), 0, f.Len())
	for i := range f.Len() {
		if !f.Index(i).IsZero() {
			kept = reflect.Append(kept, f.Index(i))
		}
	}
	if kept.Len() == 0 {
		f.SetZero()
		return
	}
	f.Set(kept)
}
