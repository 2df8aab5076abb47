# frozen_string_literal: true

require "yaml"

module Deploy
  # Loads deploy settings from config/deploy.yml, with ENV overrides for secrets.
  class ConfigLoader
    REQUIRED_KEYS = %w[app_name region instance_count].freeze

    def initialize(path, env: ENV)
      @path = path
      @env = env
    end

    def load
      raw = YAML.safe_load(File.read(@path), permitted_classes: [], aliases: false) || {}
      missing = REQUIRED_KEYS.reject { |key| raw.key?(key) }
      raise ArgumentError, "#{@path}: missing #{missing.join(', ')}" unless missing.empty?

      raw.merge(overrides)
    end

    private

    def overrides
      @env.each_with_object({}) do |(name, value), out|
        next unless name.start_with?("DEPLOY_")

        out[name.delete_prefix("DEPLOY_").downcase] = value
      end
    end
  end
end
