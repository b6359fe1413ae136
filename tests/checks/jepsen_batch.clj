;; Jepsen's own Kafka checker over many histories in one JVM, for tests/checks/test_jepsen_agreement.py.
;;
;; The build of Jepsen's checker the tests find ($CHAOS_SHARED_TOOLS/jepsen-kafka) checks one history per JVM, and its start costs
;; seconds: checking every corpus history twice (with and without --ww-deps) that way took ten
;; minutes. This script loads the same compiled front end once and does what its -main does for each
;; job, with the same reading, test map and checker. Usage (the build's lib/ on the class path):
;;
;;   java -cp 'LIB/*' clojure.main jepsen_batch.clj JOBS.json OUT.jsonl
;;
;; JOBS.json: [{"history": PATH, "sub-via": "assign,subscribe", "ww-deps": bool}, ...]; OUT.jsonl gets
;; one line per job, in order: {"valid?", "error-types", "bad-error-types", "checker-crashed"?}.
(require '[clojure.data.json :as json]
         '[clojure.java.io :as io]
         '[clojure.string :as str]
         '[jepsen.checker :as checker]
         '[jepsen.history :as h]
         '[jepsen.store :as store]
         '[jepsen.tests.kafka :as kafka]
         '[jepsen-kafka.check :as check])

(let [[jobs-file out-file] *command-line-args*
      jobs (json/read-str (slurp jobs-file))
      store-dir (str (java.nio.file.Files/createTempDirectory
                       "jepsen-kafka-batch" (make-array java.nio.file.attribute.FileAttribute 0)))]
  (System/setOut System/err) ; the checker logs to stdout
  (check/disable-plots!)
  (alter-var-root #'store/base-dir (constantly store-dir))
  (with-open [w (io/writer out-file)]
    (doseq [job jobs]
      (let [ops     (check/read-history (get job "history"))
            dense?  (= (map :index ops) (range (count ops)))
            history (h/history ops {:dense-indices? dense? :have-indices? true})
            procs   (->> ops (map :process) (filter integer?) distinct)
            test    {:name "kafka-oracle", :start-time "oracle"
                     :sub-via (set (map keyword (str/split (get job "sub-via" "assign") #",")))
                     :ww-deps (boolean (get job "ww-deps"))
                     :concurrency (max 1 (count procs))
                     :history history}
            result  (try (checker/check (kafka/checker) test history {})
                         (catch Throwable t {:valid? :unknown, :checker-crashed true, :error (str t)}))]
        (.write w (json/write-str (check/jsonable (select-keys result [:valid? :error-types :bad-error-types
                                                                      :checker-crashed :error]))))
        (.write w "\n")
        (.flush w))))
  (shutdown-agents)
  (System/exit 0))
