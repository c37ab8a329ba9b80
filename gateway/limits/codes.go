package limits

// Codes of the problems this package reports, in FieldError.Code and
// LineError.Code. A code is stable: the English message may be reworded, the
// code keeps its meaning, and the dashboard words it from its catalogs under
// "validation.<code>". The comment after each code lists its Args.
const (
	// CodeInvalid: the document or value is not valid (no detail). No args.
	CodeInvalid = "invalid"
	// CodeInvalidRule: a rule without a wording of its own failed. Args: the
	// rule as text, like "contains=x".
	CodeInvalidRule = "invalidRule"
	// CodeRequired: the value is missing. No args.
	CodeRequired = "required"
	// CodeWholeNumberRange: not a whole number from lo to hi. Args: lo, hi.
	CodeWholeNumberRange = "wholeNumber"
	// CodeLengthRange: a string not lo to hi characters long. Args: lo, hi.
	CodeLengthRange = "length"
	// CodeCapRange: a per-model cap that is not a whole number from lo to hi.
	// Args: lo, hi.
	CodeCapRange = "cap"
	// CodeModelKey: a model name that cannot key a per-model cap. Args: the
	// longest name allowed.
	CodeModelKey = "modelKey"
	// CodeModelPattern: an entry of a client key's models list that is not
	// provider/model, a bare model id or provider/*. Args: the longest entry
	// allowed.
	CodeModelPattern = "modelPattern"
	// CodeProviderKey: a provider name that does not match [a-z0-9-]{1,n}.
	// Args: n.
	CodeProviderKey = "providerKey"

	// CodeAtLeast, CodeAtMost, CodeMoreThan, CodeLessThan and CodeExactly bound
	// a number; with CodeSuffixChars appended they bound a string's length,
	// with CodeSuffixItems a list's or map's size. Args: the bound.
	CodeAtLeast  = "atLeast"
	CodeAtMost   = "atMost"
	CodeMoreThan = "moreThan"
	CodeLessThan = "lessThan"
	CodeExactly  = "exactly"
	// CodeSuffixChars and CodeSuffixItems complete the bound codes above.
	CodeSuffixChars = "Chars"
	CodeSuffixItems = "Items"

	// CodeOneOf: not one of the allowed values. Args: the values, joined by ", ".
	CodeOneOf = "oneOf"
	// CodeURL: not an absolute http(s) URL. No args.
	CodeURL = "url"
	// CodeEmail: not an email address. No args.
	CodeEmail = "email"
	// CodeUUID: not a UUID. No args.
	CodeUUID = "uuid"
	// CodeAlphanumeric: holds something other than letters and digits. No args.
	CodeAlphanumeric = "alphanum"
	// CodeUnique: a list holds a value twice. No args.
	CodeUnique = "unique"
	// CodeExcludes: holds a forbidden character. Args: the characters.
	CodeExcludes = "excludes"

	// CodeUnknownField: a key the document does not have. No args.
	CodeUnknownField = "unknownField"
	// CodeDuplicateField: a key given twice in one object. No args.
	CodeDuplicateField = "duplicateField"
	// CodeNotJSON: the document is not JSON. No args.
	CodeNotJSON = "notJSON"
	// CodeNotObject: not a JSON object. No args.
	CodeNotObject = "notObject"
	// CodeNotModelMap: modelConcurrency is not an object of caps. No args.
	CodeNotModelMap = "notModelMap"
	// CodeNotProviderMap: providers is not an object of settings. No args.
	CodeNotProviderMap = "notProviderMap"
	// CodeNotModelList: a client key's models is not a list of strings. No args.
	CodeNotModelList = "notModelList"
	// CodeNotWhole: not a whole number. No args.
	CodeNotWhole = "notWhole"
	// CodeNotBool: not true or false. No args.
	CodeNotBool = "notBool"
	// CodeAdaptiveNeedsCap: adaptive is true but maxConcurrent is not 1 or
	// more. No args.
	CodeAdaptiveNeedsCap = "adaptiveNeedsCap"

	// CodeLineShape: a model=cap line without '='. No args.
	CodeLineShape = "lineShape"
	// CodeModelMissing: a model=cap line with nothing before '='. No args.
	CodeModelMissing = "modelMissing"
	// CodeDuplicateModel: a model capped twice in the text. Args: the model,
	// the line it was first capped on.
	CodeDuplicateModel = "duplicateModel"
	// CodeDuplicateListed: a model listed twice in a client key's models
	// text. Args: the model, the line it was first listed on.
	CodeDuplicateListed = "duplicateListed"
	// CodeTooManyModels: a model=cap text capping more models than one
	// connection may. Args: the most allowed.
	CodeTooManyModels = "tooManyModels"
	// CodeProviderLineShape: a per-provider line that is not "provider
	// maxConcurrent [maxWaitMs]". No args.
	CodeProviderLineShape = "providerLineShape"
	// CodeDuplicateProvider: a provider listed twice in the per-provider
	// text. Args: the provider, the line it was first listed on.
	CodeDuplicateProvider = "duplicateProvider"
	// CodeNotAliasMap: aliases is not an object of alias names to models.
	// No args.
	CodeNotAliasMap = "notAliasMap"
	// CodeAliasOfAlias: an alias whose target is an alias. Args: the target.
	CodeAliasOfAlias = "aliasOfAlias"
	// CodeAliasLineShape: an aliases line without '='. No args.
	CodeAliasLineShape = "aliasLineShape"
	// CodeDuplicateAlias: an alias given twice in the aliases text. Args:
	// the alias, the line it was first given on.
	CodeDuplicateAlias = "duplicateAlias"
	// CodeTooManyAliases: aliases text with more aliases than the settings
	// may hold. Args: the most allowed.
	CodeTooManyAliases = "tooManyAliases"
	// CodeLine: one bad line of the model=cap textarea, reported on the
	// modelConcurrency field (ApplyForm). Args: the LineError itself, whose own
	// Code and Args say what is wrong with the line.
	CodeLine = "line"
	// CodeUSD: a price that is not a number of dollars from 0 to 10000 with
	// at most 6 decimals. Args: the upper bound.
	CodeUSD = "usd"
	// CodePriceLineShape: a prices line without 3 to 5 fields. No args.
	CodePriceLineShape = "priceLineShape"
	// CodeDuplicatePrice: a model pattern priced twice in the prices text.
	// Args: the pattern, the line it was first given on.
	CodeDuplicatePrice = "duplicatePrice"
	// CodeTooManyPrices: prices text with more patterns than the settings
	// may hold. Args: the most allowed.
	CodeTooManyPrices = "tooManyPrices"
	// CodeBudgetUSD: a money budget that is not a number of dollars from 0
	// to 1000000 with at most 2 decimals. Args: the upper bound.
	CodeBudgetUSD = "budgetUsd"
)

// Codes returns every code this package may put in a FieldError or
// LineError, bound codes with their suffixes included; a test keeps it
// complete, so the dashboard's catalogs can be checked against it.
func Codes() []string {
	codes := []string{
		CodeInvalid, CodeInvalidRule, CodeRequired, CodeWholeNumberRange, CodeLengthRange,
		CodeCapRange, CodeModelKey, CodeModelPattern, CodeProviderKey,
		CodeOneOf, CodeURL, CodeEmail, CodeUUID, CodeAlphanumeric, CodeUnique, CodeExcludes,
		CodeUnknownField, CodeDuplicateField, CodeNotJSON, CodeNotObject, CodeNotModelMap,
		CodeNotProviderMap, CodeNotModelList, CodeNotWhole, CodeNotBool, CodeAdaptiveNeedsCap,
		CodeLineShape, CodeModelMissing, CodeDuplicateModel, CodeDuplicateListed, CodeTooManyModels, CodeProviderLineShape, CodeDuplicateProvider, CodeLine,
		CodeNotAliasMap, CodeAliasOfAlias, CodeAliasLineShape, CodeDuplicateAlias, CodeTooManyAliases,
		CodeUSD, CodeBudgetUSD, CodePriceLineShape, CodeDuplicatePrice, CodeTooManyPrices,
	}
	for _, bound := range []string{CodeAtLeast, CodeAtMost, CodeMoreThan, CodeLessThan, CodeExactly} {
		codes = append(codes, bound, bound+CodeSuffixChars, bound+CodeSuffixItems)
	}
	return codes
}
