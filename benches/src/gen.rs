//! Deterministic synthetic agent transcripts in Haystack's `ChatMessage.to_dict` shape.
//!
//! Std only, so xtask can include this file with `#[path]` and stay light. The JSON is written
//! by hand, in exactly the key order `to_dict` uses, which also keeps a 50 MB transcript to a
//! fraction of a second.
//!
//! A transcript is a system and a user message, then agent steps until the target size is
//! reached: an assistant message with text (sometimes reasoning) and 1–4 parallel tool calls,
//! followed by one tool message per call. Results run from a few bytes to tens of kilobytes of
//! code, logs, JSON or prose; some are errors, some carry a small PNG, some are already-offloaded
//! pointers (`tool_result_offloaded` in meta). Now and then the user speaks again.
//!
//! Text is as non-ASCII as real transcripts are: most prose is English with a few accented,
//! Greek, Cyrillic, CJK and emoji words, and some of it (a paragraph, a comment, a search
//! result) is French, German or Spanish, Chinese, Japanese, Korean or Russian, or chat full of
//! emoji (with variation selectors and joiners, and characters beyond U+FFFF).

/// Bumped whenever the output changes, so transcripts cached under an older version's name
/// are never read again.
pub const VERSION: u32 = 2;

/// The file name a cached transcript of `size` and `seed` goes under.
pub fn file_name(size: &str, seed: u64) -> String {
    format!("transcript-{size}-seed{seed}-v{VERSION}.json")
}

/// A 1×1 PNG, valid base64, so image validation and MIME sniffing pass.
const PNG_B64: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";

const WORDS: &[&str] = &[
    "the", "of", "and", "to", "in", "is", "that", "for", "it", "with", "as", "was", "on", "be", "by", "this",
    "are", "from", "at", "or", "result", "error", "file", "path", "search", "query", "value", "line",
    "function", "return", "data", "config", "tool", "agent", "context", "token", "window", "step", "user",
    "model", "json", "list", "item", "index", "count", "total", "page", "request", "response", "build",
    "test", "module", "cache", "thread", "buffer", "parser", "schema",
];
const UNICODE_WORDS: &[&str] = &[
    "naïve",
    "café",
    "Straße",
    "déjà",
    "Ελληνικά",
    "русский",
    "日本語",
    "中文",
    "한국어",
    "עברית",
    "العربية",
    "😀",
    "🚀",
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
    "𠜎𠜱",
    "🧪",
    "✓",
    "→",
    "…",
    "—",
];
/// Languages prose comes in, with their words, whether words are joined by spaces, and how
/// sentences end.
struct Language {
    words: &'static [&'static str],
    spaced: bool,
    stop: &'static str,
}

const EUROPEAN: Language = Language {
    words: &[
        "le",
        "la",
        "les",
        "des",
        "et",
        "à",
        "où",
        "très",
        "déjà",
        "été",
        "être",
        "problème",
        "fenêtre",
        "réponse",
        "données",
        "paramètre",
        "élément",
        "requête",
        "ça",
        "garçon",
        "cœur",
        "français",
        "der",
        "die",
        "das",
        "und",
        "über",
        "Größe",
        "Schlüssel",
        "müssen",
        "Prüfung",
        "Übersicht",
        "Fehlermeldung",
        "Änderung",
        "Straße",
        "el",
        "los",
        "año",
        "niño",
        "está",
        "configuración",
        "función",
        "búsqueda",
        "señal",
        "más",
        "también",
        "archivo",
        "sí",
    ],
    spaced: true,
    stop: ".",
};
const CHINESE: Language = Language {
    words: &[
        "的",
        "是",
        "在",
        "文件",
        "错误",
        "配置",
        "函数",
        "返回",
        "数据",
        "测试",
        "模块",
        "缓存",
        "线程",
        "请求",
        "响应",
        "用户",
        "模型",
        "上下文",
        "窗口",
        "令牌",
        "我们",
        "需要",
        "修改",
        "这个",
        "问题",
        "已经",
        "完成",
        "检查",
        "结果",
        "路径",
        "没有",
        "找到",
    ],
    spaced: false,
    stop: "。",
};
const JAPANESE: Language = Language {
    words: &[
        "ファイル",
        "エラー",
        "設定",
        "関数",
        "データ",
        "テスト",
        "です",
        "ます",
        "を",
        "に",
        "は",
        "が",
        "の",
        "読み込み",
        "書き込み",
        "キャッシュ",
        "リクエスト",
        "確認",
        "修正",
        "しました",
        "できません",
        "結果",
    ],
    spaced: false,
    stop: "。",
};
const KOREAN: Language = Language {
    words: &[
        "파일",
        "오류",
        "설정",
        "함수",
        "데이터",
        "테스트",
        "요청",
        "응답",
        "사용자",
        "모델",
        "확인",
        "수정",
        "했습니다",
        "없습니다",
        "결과",
        "경로",
        "그리고",
    ],
    spaced: true,
    stop: ".",
};
const RUSSIAN: Language = Language {
    words: &[
        "файл",
        "ошибка",
        "настройка",
        "функция",
        "данные",
        "тест",
        "запрос",
        "ответ",
        "модуль",
        "и",
        "в",
        "не",
        "это",
        "путь",
        "результат",
        "нужно",
        "исправить",
        "пользователь",
    ],
    spaced: true,
    stop: ".",
};
const EMOJI: &[&str] =
    &["😀", "🚀", "✅", "❌", "🔥", "👍", "🎉", "⚠️", "🧪", "📁", "🐛", "✨", "👩‍💻", "🤔", "💡", "🙏🏽"];

const TOOLS: &[&str] =
    &["read_file", "search_code", "run_tests", "web_search", "list_dir", "shell", "fetch_url", "query_db"];
const LEVELS: &[&str] = &["DEBUG", "INFO", "INFO", "INFO", "WARN", "ERROR"];
const IDENTS: &[&str] = &[
    "config",
    "parse_args",
    "handler",
    "state",
    "buffer",
    "result",
    "tokens",
    "window",
    "request",
    "session",
    "index",
    "cursor",
    "limit",
    "offset",
    "retries",
];

/// A size in bytes from `123`, `500KB`, `10MB`, `1.5MB` or `2GB` (decimal units).
pub fn parse_size(text: &str) -> Result<usize, String> {
    let text = text.trim();
    let upper = text.to_ascii_uppercase();
    let (number, unit) = match upper.find(|c: char| c.is_ascii_alphabetic()) {
        Some(at) => (&upper[..at], &upper[at..]),
        None => (upper.as_str(), ""),
    };
    let scale = match unit.trim() {
        "" | "B" => 1.0,
        "K" | "KB" => 1e3,
        "M" | "MB" => 1e6,
        "G" | "GB" => 1e9,
        other => return Err(format!("unknown size unit {other:?} in {text:?}; use B, KB, MB or GB")),
    };
    let value: f64 =
        number.trim().parse().map_err(|_| format!("{text:?} is not a size such as 10MB or 500KB"))?;
    if !(value.is_finite() && value >= 0.0) {
        return Err(format!("{text:?} is not a size such as 10MB or 500KB"));
    }
    Ok((value * scale) as usize)
}

/// A transcript of about `target_bytes` bytes (a JSON array of messages), the same for the
/// same `seed` on every machine.
pub fn generate(target_bytes: usize, seed: u64) -> String {
    let mut g = Generator { rng: SplitMix64(seed), out: String::with_capacity(target_bytes + 64 * 1024) };
    g.out.push('[');
    g.system();
    g.user();
    let mut step = 0usize;
    while g.out.len() < target_bytes {
        if step > 0 && g.rng.chance(0.03) {
            g.user();
        }
        g.step(step);
        step += 1;
    }
    g.out.push_str("\n]\n");
    g.out
}

/// splitmix64: tiny, fast and good enough to pick words.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `low..=high`.
    fn range(&mut self, low: usize, high: usize) -> usize {
        low + (self.next() % (high - low + 1) as u64) as usize
    }

    fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.range(0, items.len() - 1)]
    }
}

struct Call {
    tool: &'static str,
    id: String,
    arguments: String,
}

struct Generator {
    rng: SplitMix64,
    out: String,
}

impl Generator {
    fn open(&mut self, role: &str, meta: &str) {
        if !self.out.ends_with('[') {
            self.out.push(',');
        }
        self.out.push_str("\n{\"role\":\"");
        self.out.push_str(role);
        self.out.push_str("\",\"meta\":");
        self.out.push_str(meta);
        self.out.push_str(",\"name\":null,\"content\":[");
    }

    fn close(&mut self) {
        self.out.push_str("]}");
    }

    fn text_part(&mut self, text: &str) {
        self.out.push_str("{\"text\":");
        push_json_str(&mut self.out, text);
        self.out.push('}');
    }

    fn image_part(&mut self) {
        self.out.push_str("{\"image\":{\"base64_image\":\"");
        self.out.push_str(PNG_B64);
        self.out.push_str("\",\"mime_type\":\"image/png\",\"detail\":null,\"meta\":{},\"validation\":true}}");
    }

    fn system(&mut self) {
        self.open("system", "{}");
        let text = format!(
            "You are a coding agent. Use the tools to inspect and change the repository. {}",
            self.prose(400)
        );
        self.text_part(&text);
        self.close();
    }

    fn user(&mut self) {
        self.open("user", "{}");
        let text = self.prose_between(40, 600);
        self.text_part(&text);
        if self.rng.chance(0.1) {
            self.out.push(',');
            self.image_part();
        }
        self.close();
    }

    fn step(&mut self, step: usize) {
        let calls: Vec<Call> = (0..self.rng.range(1, 4)).map(|i| self.call(step, i)).collect();
        self.open("assistant", "{}");
        let mut first = true;
        if self.rng.chance(0.7) {
            let text = self.prose_between(20, 400);
            self.text_part(&text);
            first = false;
        }
        if self.rng.chance(0.15) {
            if !first {
                self.out.push(',');
            }
            self.out.push_str("{\"reasoning\":{\"reasoning_text\":");
            let text = self.prose_between(50, 800);
            push_json_str(&mut self.out, &text);
            self.out.push_str(",\"extra\":{}}}");
            first = false;
        }
        for call in &calls {
            if !first {
                self.out.push(',');
            }
            first = false;
            self.out.push_str("{\"tool_call\":");
            push_call(&mut self.out, call);
            self.out.push('}');
        }
        self.close();
        for call in &calls {
            self.result(call);
        }
    }

    fn call(&mut self, step: usize, i: usize) -> Call {
        let tool = self.rng.pick(TOOLS);
        let mut arguments = String::from("{");
        match tool {
            "read_file" | "list_dir" => {
                arguments.push_str("\"path\":");
                let path = self.path();
                push_json_str(&mut arguments, &path);
                arguments.push_str(&format!(",\"max_lines\":{}", self.rng.range(50, 2000)));
            }
            "run_tests" | "shell" => {
                arguments.push_str("\"command\":");
                let command = format!("cargo test -p {} -- {}", self.ident(), self.ident());
                push_json_str(&mut arguments, &command);
                arguments.push_str(&format!(",\"timeout\":{}.5", self.rng.range(1, 120)));
            }
            _ => {
                arguments.push_str("\"query\":");
                let query = self.prose_between(10, 80);
                push_json_str(&mut arguments, &query);
                arguments.push_str(&format!(
                    ",\"limit\":{},\"filters\":{{\"lang\":\"rust\",\"recent\":{}}}",
                    self.rng.range(1, 50),
                    self.rng.chance(0.5)
                ));
            }
        }
        arguments.push('}');
        Call { tool, id: format!("call_{step}_{i}"), arguments }
    }

    fn result(&mut self, call: &Call) {
        if self.rng.chance(0.04) {
            let reference = format!("/tmp/offload/{}.txt", call.id);
            let meta = format!("{{\"tool_result_offloaded\":[\"{reference}\"]}}");
            self.open("tool", &meta);
            let preview = self.prose(120);
            let text = format!(
                "[Tool result offloaded to {reference}: {} characters. Preview: {preview}]",
                self.rng.range(5_000, 80_000)
            );
            self.result_part(call, |out| push_json_str(out, &text), false);
            self.close();
            return;
        }
        let error = self.rng.chance(0.06);
        let text = if error { self.error_text() } else { self.body() };
        self.open("tool", "{}");
        if !error && self.rng.chance(0.02) {
            let png = {
                let mut image = String::new();
                std::mem::swap(&mut image, &mut self.out);
                self.image_part();
                std::mem::swap(&mut image, &mut self.out);
                image
            };
            self.result_part(
                call,
                |out| {
                    out.push_str("[{\"text\":");
                    push_json_str(out, &text);
                    out.push_str("},");
                    out.push_str(&png);
                    out.push(']');
                },
                false,
            );
        } else {
            self.result_part(call, |out| push_json_str(out, &text), error);
        }
        self.close();
    }

    fn result_part(&mut self, call: &Call, result: impl FnOnce(&mut String), error: bool) {
        self.out.push_str("{\"tool_call_result\":{\"result\":");
        result(&mut self.out);
        self.out.push_str(",\"origin\":");
        push_call(&mut self.out, call);
        self.out.push_str(if error { ",\"error\":true}}" } else { ",\"error\":false}}" });
    }

    /// A result body: mostly mid-sized, with a long tail of tens of kilobytes.
    fn body(&mut self) -> String {
        let roll = self.rng.range(0, 99);
        let size = match roll {
            0..=24 => self.rng.range(2, 200),
            25..=69 => self.rng.range(200, 4_000),
            70..=94 => self.rng.range(4_000, 18_000),
            _ => self.rng.range(20_000, 50_000),
        };
        if size < 16 {
            return ["ok", "", "42", "done", "[]", "{}", "true", "no matches"][size % 8].to_owned();
        }
        match self.rng.range(0, 3) {
            0 => self.code(size),
            1 => self.log(size),
            2 => self.json(size),
            _ => self.prose(size),
        }
    }

    fn error_text(&mut self) -> String {
        let mut text = format!(
            "Traceback (most recent call last):\n  File \"{}\", line {}, in {}\n",
            self.path(),
            self.rng.range(1, 900),
            self.ident()
        );
        text.push_str(&format!("ValueError: {}", self.prose_between(20, 300)));
        text
    }

    fn word(&mut self) -> &'static str {
        if self.rng.chance(0.04) {
            self.rng.pick(UNICODE_WORDS)
        } else {
            self.rng.pick(WORDS)
        }
    }

    fn ident(&mut self) -> &'static str {
        self.rng.pick(IDENTS)
    }

    fn path(&mut self) -> String {
        format!("src/{}/{}.rs", self.ident(), self.ident())
    }

    fn prose_between(&mut self, low: usize, high: usize) -> String {
        let size = self.rng.range(low, high);
        self.prose(size)
    }

    /// About `size` bytes of prose: mostly English, sometimes another language or emoji-laden
    /// chat (see the module's header).
    fn prose(&mut self, size: usize) -> String {
        let language = match self.rng.range(0, 99) {
            0..=69 => None,
            70..=79 => Some(&EUROPEAN),
            80..=84 => Some(&CHINESE),
            85..=87 => Some(&JAPANESE),
            88..=89 => Some(&KOREAN),
            90..=94 => Some(&RUSSIAN),
            _ => return self.chat(size),
        };
        let mut text = String::with_capacity(size + 16);
        let mut sentence = 0;
        while text.len() < size {
            let spaced = language.is_none_or(|l| l.spaced);
            if !text.is_empty() && (spaced || sentence == 0) {
                text.push(' ');
            }
            match language {
                // Even other languages borrow an English word now and then.
                Some(l) if !self.rng.chance(0.1) => text.push_str(self.rng.pick(l.words)),
                _ => text.push_str(self.word()),
            }
            sentence += 1;
            if sentence > 6 && self.rng.chance(0.15) {
                text.push_str(language.map_or(".", |l| l.stop));
                if self.rng.chance(0.1) {
                    text.push_str("\n\n");
                }
                sentence = 0;
            }
        }
        text
    }

    /// English chat with an emoji every few words.
    fn chat(&mut self, size: usize) -> String {
        let mut text = String::with_capacity(size + 16);
        while text.len() < size {
            if !text.is_empty() {
                text.push(' ');
            }
            if self.rng.chance(0.2) {
                text.push_str(self.rng.pick(EMOJI));
            } else {
                text.push_str(self.word());
            }
            if self.rng.chance(0.08) {
                text.push_str(if self.rng.chance(0.5) { "!" } else { "." });
            }
        }
        text
    }

    fn code(&mut self, size: usize) -> String {
        let mut text = String::with_capacity(size + 80);
        let mut line = 1;
        while text.len() < size {
            let indent = "    ".repeat(self.rng.range(0, 3));
            let code = match self.rng.range(0, 5) {
                0 => {
                    format!("fn {}(&mut self, {}: usize) -> Result<(), Error> {{", self.ident(), self.ident())
                }
                1 => {
                    format!("let {} = self.{}.get({}).unwrap_or_default();", self.ident(), self.ident(), line)
                }
                2 => format!("// {}", self.prose(40)),
                3 => {
                    format!("if {} > {} {{ return Err(Error::Limit {{ at: {line} }}); }}", self.ident(), line)
                }
                4 => format!("println!(\"{{}} \\\"{}\\\"\", {});", self.word(), self.ident()),
                _ => "}".to_owned(),
            };
            text.push_str(&format!("{line:>5}\t{indent}{code}\n"));
            line += 1;
        }
        text
    }

    fn log(&mut self, size: usize) -> String {
        let mut text = String::with_capacity(size + 120);
        let mut second = self.rng.range(0, 80_000);
        while text.len() < size {
            second += self.rng.range(0, 3);
            let level = self.rng.pick(LEVELS);
            let words = self.prose_between(20, 90);
            text.push_str(&format!(
                "2025-06-{:02}T{:02}:{:02}:{:02}.{:03}Z {level:<5} {}: {words}\n",
                1 + second / 86_400 % 28,
                second / 3600 % 24,
                second / 60 % 60,
                second % 60,
                self.rng.range(0, 999),
                self.ident()
            ));
        }
        text
    }

    fn json(&mut self, size: usize) -> String {
        let mut text = String::with_capacity(size + 200);
        text.push_str("{\"results\": [");
        let mut first = true;
        while text.len() < size {
            if !first {
                text.push_str(", ");
            }
            first = false;
            let title = self.prose_between(10, 60);
            text.push_str(&format!(
                "{{\"id\": {}, \"score\": 0.{}, \"path\": \"{}\", \"title\": ",
                self.rng.range(1, 99_999),
                self.rng.range(1, 999),
                self.path()
            ));
            push_json_str(&mut text, &title);
            text.push_str(&format!(
                ", \"tags\": [\"{}\", \"{}\"], \"meta\": null}}",
                self.word(),
                self.ident()
            ));
        }
        text.push_str("], \"truncated\": false}");
        text
    }
}

fn push_call(out: &mut String, call: &Call) {
    out.push_str("{\"tool_name\":\"");
    out.push_str(call.tool);
    out.push_str("\",\"arguments\":");
    out.push_str(&call.arguments);
    out.push_str(",\"id\":\"");
    out.push_str(&call.id);
    out.push_str("\",\"extra\":null}");
}

/// Appends `text` as a JSON string literal; non-ASCII is written as is, as UTF-8.
fn push_json_str(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}
