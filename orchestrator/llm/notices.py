"""What the command line says about the model before any of LangChain is loaded."""

OFFLINE_NOTICE = (
    "No model configured (set OPENAI_API_KEY or OPENAI_BASE_URL, or ORCHESTRATOR_MODEL): "
    "using the built-in offline model, which only matches requests to tools."
)
