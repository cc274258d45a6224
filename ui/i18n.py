"""UI strings in English and Chinese, and the zh text of KB entries where the KB has it."""

STRINGS = {
    "language": ("Language / 语言", "Language / 语言"),
    "page": ("Page", "页面"),
    "diagnose": ("Diagnose", "诊断"),
    "live": ("Live", "实时"),
    "knowledge": ("Knowledge", "知识库"),
    "diagnose_title": ("Diagnose a slowdown", "诊断性能下降"),
    "headline": ("What got slower?", "什么变慢了？"),
    "h_throughput": ("Throughput (tokens/s)", "吞吐（tokens/s）"),
    "h_ttft": ("Time to first token (TTFT)", "首 token 时延（TTFT）"),
    "h_itl": ("Inter-token latency (ITL)", "token 间时延（ITL）"),
    "h_p99": ("Only P99 (the tail)", "只有 P99（尾部）"),
    "h_step": ("Training step time", "训练单步时间"),
    "h_node": ("One node or GPU", "某一个节点或 GPU"),
    "question": ("Next question", "下一个问题"),
    "why": ("Why this question", "为什么问这个"),
    "gain": ("expected information gain {bits:.2f} bits, {cost:g} min of work", "期望信息增益 {bits:.2f} bit，约 {cost:g} 分钟"),
    "distinguishes": ("it separates", "用于区分"),
    "how": ("How to measure (shown only, never run by perfdoctor)", "如何测量（仅展示，perfdoctor 不会执行）"),
    "disruptive": ("disruptive: touches production", "有干扰：会影响生产"),
    "baseline": ("baseline", "基线"),
    "current": ("now", "当前"),
    "value_help": ("a number, or per entity: gpu0: 1980, gpu1: 1095. Empty means don't know.",
                   "一个数，或按实体填写：gpu0: 1980, gpu1: 1095。留空表示不知道。"),
    "dont_know": ("don't know", "不知道"),
    "none_of_these": ("(none of these)", "（都没有）"),
    "changes_label": ("What changed before the regression? (empty: nothing changed)", "回退前改了什么？（留空：什么都没改）"),
    "submit": ("Submit answer", "提交回答"),
    "skip": ("Don't know any of these", "都不知道"),
    "no_more": ("No more questions: every probe is answered or skipped.", "没有更多问题：所有探测都已回答或跳过。"),
    "upcoming": ("Questions after this one", "之后的问题"),
    "ranking": ("Ranking", "排序"),
    "conf_low": ("Low confidence: the leading cause has P = {p:.2f}. On unseen incidents a leader under P 0.5 was right "
                 "about two times in three, one under P 0.3 fewer than half the time: answer the next questions before "
                 "acting.",
                 "置信度低：首要原因的 P = {p:.2f}。在未参与调参的事故上，P 低于 0.5 的首位约三次中对两次，低于 0.3 的不到一半："
                 "先回答后面的问题再动手。"),
    "conf_close": ("Close call: {a} (P = {p:.2f}) and {b} (P = {p2:.2f}) are not yet told apart; the next question "
                   "is chosen to separate them.",
                   "难分高下：{a}（P = {p:.2f}）和 {b}（P = {p2:.2f}）尚未区分开；下一个问题就是为区分它们而选的。"),
    "no_evidence": ("No evidence yet: the ranking shows prior probabilities.", "还没有证据：排序为先验概率。"),
    "leading": ("Leading hypothesis", "首要假设"),
    "chain": ("Causal chain", "因果链"),
    "ev_for": ("Evidence for", "支持的证据"),
    "ev_against": ("Evidence against", "反对的证据"),
    "where": ("Where", "位置"),
    "remedies": ("Remedies and how they can fail", "处置方案及其失败情形"),
    "ceilings": ("Observed vs hardware ceiling", "实测值与硬件上限"),
    "share_of_ceiling": ("share of the ceiling (1 = at the limit)", "占上限的比例（1 = 已到上限）"),
    "risk": ("Risk (counterexample)", "风险（反例）"),
    "cannot_fix": ("Cannot fix", "无法解决"),
    "retest": ("Re-test", "复测"),
    "snapshot": ("Snapshot", "快照"),
    "load": ("Load a snapshot file (YAML or JSON)", "加载快照文件（YAML 或 JSON）"),
    "save": ("Save answers as snapshot (YAML)", "将回答保存为快照（YAML）"),
    "report": ("Download Markdown report", "下载 Markdown 报告"),
    "reset": ("Start over", "重新开始"),
    "loaded": ("Loaded {name}", "已加载 {name}"),
    "tool_output": ("Tool output", "工具输出"),
    "tool_state": ("It shows", "它反映的是"),
    "tool_current": ("the slow state (now)", "变慢后（当前）"),
    "tool_baseline": ("the good state (baseline)", "变慢前（基线）"),
    "tool_load": ("Add a tool output", "添加工具输出"),
    "tool_help": ("nvidia-smi (-q, -x, table, dmon, topo -m), nccl-tests, ib_write_bw, iostat -x, a PyTorch profiler "
                  "trace, a vLLM or SGLang server log, a serving benchmark result, a saved /metrics page; the kind is "
                  "read from the content",
                  "nvidia-smi（-q、-x、表格、dmon、topo -m）、nccl-tests、ib_write_bw、iostat -x、PyTorch profiler trace、"
                  "vLLM 或 SGLang 服务日志、推理服务压测结果、保存的 /metrics 页面；类型由内容识别"),
    "tool_read": ("Read {name} ({kind}) as {state}", "已读取 {name}（{kind}），作为{state}"),
    "live_title": ("Live diagnosis from Prometheus", "基于 Prometheus 的实时诊断"),
    "prom_url": ("Prometheus URL", "Prometheus 地址"),
    "window": ("Window", "时间窗口"),
    "offset": ("Baseline offset", "基线偏移"),
    "selector": ("Label selector (optional)", "标签选择器（可选）"),
    "token": ("Bearer token (optional, never saved)", "Bearer token（可选，不会保存）"),
    "refresh": ("Refresh now", "立即刷新"),
    "auto": ("Refresh every 60 s", "每 60 秒刷新"),
    "querying": ("Querying Prometheus...", "正在查询 Prometheus..."),
    "no_reader": ("Prometheus reader not installed", "未安装 Prometheus 读取模块"),
    "no_token_support": ("This Prometheus reader does not take a token; the token was not used.",
                         "此 Prometheus 读取模块不支持 token；未使用该 token。"),
    "last_good": ("Showing the last successful ranking, from {at}.", "显示上一次成功的排序（{at}）。"),
    "nothing_yet": ("Nothing was diagnosed.", "没有得到诊断。"),
    "per_entity": ("Per GPU / rank (outliers in red)", "按 GPU / rank（红色为离群）"),
    "base_vs_now": ("Baseline vs now", "基线与当前对比"),
    "kb_title": ("Knowledge base", "知识库"),
    "tech_map": ("Technology-to-bottleneck map", "技术与瓶颈对照表"),
    "layer": ("Layer", "层"),
    "bottleneck": ("Bottleneck", "瓶颈"),
    "all": ("all", "全部"),
    "causes_probes": ("Root causes and the probes that test them", "根因及检验它们的探测"),
    "graph": ("Causal graph", "因果图"),
    "hardware": ("Hardware ceilings: GPUs and model shapes", "硬件上限：GPU 与模型结构"),
    "focus": ("Show the neighbourhood of one root cause", "只显示某个根因的邻域"),
    "everything": ("(whole graph)", "（整个图）"),
}


def t(key: str, lang: str = "en", **fmt) -> str:
    en, zh = STRINGS[key]
    text = zh if lang == "zh" else en
    return text.format(**fmt) if fmt else text


def kb_text(entry, field: str, lang: str = "en"):
    """The zh text of a KB entry's field when present and the UI is in Chinese, else the English field."""
    zh = getattr(entry, "zh", None)
    if lang == "zh" and zh is not None and getattr(zh, field, None):
        return getattr(zh, field)
    return getattr(entry, field)
