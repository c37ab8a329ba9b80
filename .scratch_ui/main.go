package main
import ("net/url";"fmt"
"github.com/gatehouse-dev/gatehouse/gateway/limits")
func main(){
 _, fe := limits.ApplyForm(limits.Overrides{}, url.Values{"maxConcurrent":{"abc"},"maxWaitMs":{"-1"},"rpm":{"1.5"},"tpd":{"1e20"},"modelConcurrency":{"glm-5=0\nx"}}, "rateLimitOverrides")
 for _, e := range fe { fmt.Printf("%q %q\n", e.Field, e.Message) }
 _, fe2 := limits.DecodeSettings([]byte(`{"maxAttempts":"x","defaultMaxWaitMs":0,"providers":{"zai":{"maxConcurrent":-1}}}`), "")
 for _, e := range fe2 { fmt.Printf("%q %q\n", e.Field, e.Message) }
 o,_ := limits.ApplyForm(limits.Overrides{}, url.Values{"maxConcurrent":{"4"},"modelConcurrency":{"glm-5=1\nglm-4.7=3"}}, "rateLimitOverrides")
 fmt.Println(*o.MaxConcurrent, o.ModelConcurrency, limits.FormatModelCaps(o.ModelConcurrency))
 e := limits.Resolve(limits.DefaultSettings(), "zai", limits.Overrides{})
 fmt.Println(e.Fallback("maxWaitMs"), e.Fallback("executionMaxWaitMs"), e.Fallback("maxQueueDepth"))
}
