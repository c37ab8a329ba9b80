package web

import "strconv"

// percentText is a used fraction as a whole percentage ("92 %"), rounded
// down so that 0.999 never reads as 100 %.
func percentText(used float64) string {
	return strconv.Itoa(int(used*100+1e-9)) + " %"
}
