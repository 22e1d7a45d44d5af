package redact

import (
	"regexp/syntax"
	"slices"
	"unicode/utf8"
)

// requiredLiterals are literals one of which every match of the regexp
// contains (a custom pattern's hints, found as the built-in patterns'
// are written by hand), or nil if the regexp promises none: output that
// holds none of them cannot match, and is not searched, whatever the
// pattern's program costs. Case-folded literals are not used.
func requiredLiterals(re *syntax.Regexp) []string {
	switch re.Op {
	case syntax.OpLiteral:
		// U+FFFD also matches a byte that is not UTF-8, which a
		// substring search would not find.
		if re.Flags&syntax.FoldCase != 0 || len(re.Rune) == 0 || slices.Contains(re.Rune, utf8.RuneError) {
			return nil
		}
		return []string{string(re.Rune)}
	case syntax.OpCapture, syntax.OpPlus:
		return requiredLiterals(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min == 0 {
			return nil
		}
		return requiredLiterals(re.Sub[0])
	case syntax.OpConcat:
		// Any factor's literals will do: the ones whose shortest is
		// longest are the rarest.
		var best []string
		for _, sub := range re.Sub {
			if lits := requiredLiterals(sub); lits != nil && (best == nil || shortest(lits) > shortest(best)) {
				best = lits
			}
		}
		return best
	case syntax.OpAlternate:
		var all []string
		for _, sub := range re.Sub {
			lits := requiredLiterals(sub)
			if lits == nil {
				return nil
			}
			all = append(all, lits...)
		}
		slices.Sort(all)
		return slices.Compact(all)
	}
	return nil
}

// shortest is the length of the shortest of lits.
func shortest(lits []string) int {
	n := len(lits[0])
	for _, l := range lits[1:] {
		n = min(n, len(l))
	}
	return n
}
